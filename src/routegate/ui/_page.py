"""The Streamlit chat page: streamed answers, a per-turn panel (route, deciding layer and scores, tool
evidence, fallback reason, latency, the desk's plan with the steps the turn ran) in the sidebar and under each
answer, new session / reset.
Everything goes through the server over HTTP (:class:`~routegate.ui.client.ChatClient`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from routegate._extras import needs

with needs("ui"):
    import streamlit as st
    from streamlit.runtime.state import SessionStateProxy

from routegate.settings import Settings
from routegate.ui._plan import plan_chart
from routegate.ui.client import ChatClient, ChatClientError, ServerEvent

TITLE = "routegate support desk"
PLACEHOLDER = "Ask about a customer or a ticket, a policy, the weather…"


def _new_session(state: SessionStateProxy) -> None:
    state["session_id"] = uuid.uuid4().hex
    state["turns"] = []
    state.pop("turn_pick", None)


def _reset(base_url: str, api_key: str | None, state: SessionStateProxy) -> None:
    """Button callback (runs before the page is drawn, so the page shows the emptied session)."""
    with ChatClient(base_url, api_key=api_key) as client:
        try:
            client.reset(state["session_id"])
        except ChatClientError as exc:
            state["flash"] = exc.message
            return
    state["turns"] = []
    state.pop("turn_pick", None)


def _tokens(events: Iterator[ServerEvent], turn: dict[str, Any]) -> Iterator[str]:
    """Yield answer text for ``st.write_stream`` and file every other event into ``turn``."""
    for event in events:
        if event.event == "token":
            yield str(event.data.get("text", ""))
        elif event.event == "route":
            turn["decision"] = event.data
        elif event.event == "tool":
            turn["tools"].append(event.data)
        elif event.event == "final":
            turn["final"] = event.data
        elif event.event == "error":
            turn["error"] = str(event.data.get("message", "the turn failed"))


def _summary(turn: dict[str, Any]) -> str:
    if turn.get("error"):
        return "error"
    final = turn.get("final") or {}
    decision = turn.get("decision") or {}
    parts = [str(final.get("route") or decision.get("route", "?")), f"layer {decision.get('layer', '?')}"]
    if final.get("latency_ms") is not None:
        parts.append(f"{float(final['latency_ms']):.0f} ms")
    parts.append(f"fallback: {final['fallback']}" if final.get("fallback") else "no fallback")
    return " · ".join(parts)


def turn_panel(turn: dict[str, Any]) -> None:
    """The details of one turn (used in the sidebar and under each answer)."""
    if turn.get("error"):
        st.markdown(f"**Error:** {turn['error']}")
    decision = turn.get("decision") or {}
    final = turn.get("final") or {}
    route = final.get("route") or decision.get("route")
    if route:
        st.markdown(f"**Route:** `{route}` — decided by the `{decision.get('layer', '?')}` layer")
        if decision.get("why"):
            st.caption(str(decision["why"]))
    carried = next((t for t in final.get("trace") or () if t.get("node") == "followup"), None)
    if carried:  # a follow-up: what the turn took from earlier turns, and the question it was read as
        st.markdown(f"**Follow-up:** {carried.get('carried')} — read as “{carried.get('read_as')}”")
    scores = decision.get("scores") or {}
    if scores:
        ranked = sorted(scores.items(), key=lambda kv: -float(kv[1]))
        st.markdown("**Scores:** " + ", ".join(f"{name} {float(value):.2f}" for name, value in ranked))
    for tool in turn.get("tools", []):
        status = "ok" if tool.get("ok") else "failed or empty"
        st.markdown(f"**Tool:** `{tool.get('tool')}` — {tool.get('summary', '')} ({status})")
        st.json({"call": tool.get("call"), "evidence": tool.get("evidence")}, expanded=False)
    if not turn.get("tools") and route:
        st.markdown("**Tool:** none")
    if final:
        st.markdown(f"**Fallback:** {final.get('fallback') or 'none'}")
        st.markdown(f"**Stop reason:** `{final.get('stop_reason')}`")
        st.markdown(
            f"**Latency:** {float(final.get('latency_ms', 0.0)):.1f} ms in the desk, "
            f"{float(turn.get('round_trip_ms', 0.0)):.0f} ms round trip"
        )
    plan_chart(turn, st.session_state.get("plan"))  # the desk's plan, with the steps this turn ran


def _sidebar(client: ChatClient, state: SessionStateProxy) -> None:
    with st.sidebar:
        st.header("Session")
        st.caption(f"`{state['session_id']}`")
        health = client.health()
        st.caption(f"server {client.base_url}: {health.get('status', '?')} (database {health.get('database', '?')})")
        left, right = st.columns(2)
        left.button("New session", key="new_session", on_click=_new_session, args=(state,))
        right.button(
            "Reset",
            key="reset_session",
            help="forget this session's history on the server",
            on_click=_reset,
            args=(client.base_url, client.api_key, state),
        )
        if state.get("flash"):
            st.error(state.pop("flash"))
        turns = state["turns"]
        st.header("Turn details")
        if not turns:
            st.caption(
                "Send a message: the route, the deciding layer and its scores, the tool evidence, the fallback "
                "reason and the latency of each turn show here."
            )
            return
        labels = [f"{i + 1}. {t['message'][:40]}" for i, t in enumerate(turns)]
        # the widget's value lives in session state only (``_ask`` points it at the newest turn): giving it an
        # ``index`` as well makes Streamlit warn that the key's value was set two ways
        if not isinstance(state.get("turn_pick"), int) or not 0 <= state["turn_pick"] < len(turns):
            state["turn_pick"] = len(turns) - 1
        chosen = st.selectbox("Turn", range(len(turns)), format_func=lambda i: labels[i], key="turn_pick")
        turn_panel(turns[chosen if chosen is not None else -1])


def _ask(client: ChatClient, state: SessionStateProxy, prompt: str) -> None:
    turn: dict[str, Any] = {
        "message": prompt,
        "answer": "",
        "decision": None,
        "tools": [],
        "final": None,
        "error": None,
    }
    with st.chat_message("user"):
        st.markdown(prompt)
    with st.chat_message("assistant"):
        started = time.perf_counter()
        try:
            written = st.write_stream(_tokens(client.stream(prompt, session_id=state["session_id"]), turn))
            turn["answer"] = written if isinstance(written, str) else "".join(str(w) for w in written)
        except ChatClientError as exc:
            turn["error"] = exc.message
        turn["round_trip_ms"] = (time.perf_counter() - started) * 1000.0
        if turn["final"]:
            turn["answer"] = str(turn["final"].get("answer", turn["answer"]))
        if turn["error"]:
            st.error(turn["error"])
    state["turns"].append(turn)
    state["turn_pick"] = len(state["turns"]) - 1  # the sidebar follows the newest turn


def run_page(settings: Settings) -> None:
    st.set_page_config(page_title=TITLE, layout="wide")
    state = st.session_state
    if "session_id" not in state:
        _new_session(state)
    key = settings.server_keys[0] if settings.server_keys else None  # ROUTEGATE_SERVER_API_KEY, else the first of _KEYS
    with ChatClient(settings.ui_server_url, api_key=key) as client:
        if "plan" not in state:  # the desk's plan, once per session
            state["plan"] = client.plan()
        st.title(TITLE)
        for turn in state["turns"]:
            with st.chat_message("user"):
                st.markdown(turn["message"])
            with st.chat_message("assistant"):
                if turn["error"]:
                    st.error(turn["error"])
                else:
                    st.markdown(turn["answer"])
                with st.expander(_summary(turn)):
                    turn_panel(turn)
        prompt = st.chat_input(PLACEHOLDER)
        if prompt:
            _ask(client, state, prompt)
        _sidebar(client, state)
        if prompt:
            st.rerun()
