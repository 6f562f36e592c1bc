"""Property tests where untrusted input enters the LLM layer: model text, and whatever an endpoint answers."""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.triage import build_triage_agent
from routegate.core import stop_reasons as sr
from routegate.llm import LLMError, LLMFinalizer, OpenAIChatModel
from routegate.routers.llm import LLMRouter
from routegate.testing import RawReply, ScriptedChatModel, ScriptedOpenAIServer

GOAL = "User Anna (user_id=42) asks for a refund of her pro_monthly subscription"
TARGETS = ["billing_specialist", "technical_specialist", "sales_specialist", "unknown", " billing_specialist "]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
route_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(["route", "invalid", "ROUTE"]), "target": st.sampled_from(TARGETS)},
    optional={
        "args": st.one_of(json_values, st.fixed_dictionaries({"ticket": st.text(max_size=30)})),
        "x": json_values,
    },
)
model_text = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    route_like.map(json.dumps),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=model_text, final=st.text(max_size=40))
def test_any_model_text_ends_the_run_explicitly(text: str, final: str) -> None:
    router_model, final_model = ScriptedChatModel([text]), ScriptedChatModel([final])
    agent = build_triage_agent(router=LLMRouter(router_model), finalizer=LLMFinalizer(final_model))
    result = agent.run(GOAL)
    if result.stop_reason.startswith("invalid_route:"):
        assert result.phase == "route"
        assert result.raw_route == text or result.raw_route == json.loads(text)
    elif result.ok:
        assert result.output == final.strip()
    else:
        # a valid route that needed a reroute runs out of script; an empty answer is llm_empty
        assert result.stop_reason in {sr.LLM_EMPTY, "router_error:ScriptExhaustedError"}, result.stop_reason


def _expected(status: int) -> set[str]:
    if status in (401, 403):
        return {sr.LLM_AUTH}
    if status == 408:
        return {sr.LLM_TIMEOUT}
    if status == 429:
        return {sr.LLM_RATE_LIMITED}
    if status >= 500:
        return {sr.LLM_UPSTREAM}
    if status >= 400:
        return {sr.LLM_BAD_REQUEST}
    return {sr.LLM_UPSTREAM, "text"}


statuses = st.one_of(
    st.sampled_from([200, 201, 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503]), st.integers(400, 599)
)
bodies = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.builds(
        lambda content: json.dumps(
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        ).encode(),
        json_values,
    ),
)


async def _complete(chat: OpenAIChatModel) -> str:
    """The stop reason the call ended with, or "text" when it answered text."""
    try:
        await chat.complete([{"role": "user", "content": "hi"}])
    except LLMError as stop:
        return stop.stop_reason
    return "text"


def test_any_endpoint_answer_is_text_or_a_stop_reason() -> None:
    with ScriptedOpenAIServer() as server, asyncio.Runner() as runner:
        # breaker off: each scripted answer is classified on its own, a 5xx must not make the next one fail fast
        chat = OpenAIChatModel(
            model="m", api_key=server.api_key, base_url=server.base_url, max_retries=0, breaker_seconds=0
        )

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(status=statuses, body=bodies)
        def check(status: int, body: bytes) -> None:
            server.script(RawReply(body, status=status))
            outcome = runner.run(_complete(chat))
            assert outcome in _expected(status), (status, body, outcome)

        check()
        runner.run(chat.aclose())
