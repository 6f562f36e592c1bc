"""The ``final`` event on the wire, byte for byte: a desk's turn ends with a ``FinalEvent`` carrying its
``TurnResult``, and the HTTP API sends that result's JSON form (``TurnResult.to_dict``) exactly as it did when the
result was itself the stream's last event. A scripted desk gives fixed turns (a success and a stopped one) so the
bytes, timing included, are known; the server runs with API keys, so the desk's session id (behind the key's owner
id) differs from the client's and the result must be renamed to the client's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI

from routegate.apps.support.contracts import (
    AnswerToken,
    Message,
    RouteChosen,
    SupportEvent,
    ToolUsed,
    TurnResult,
)
from routegate.core import FinalEvent
from routegate.server import create_app
from routegate.server.testing import ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e

KEY = "k-final-wire-0123456789abcdef0123"


def _turn(message: str, session_id: str) -> TurnResult:
    if message == "ok":
        return TurnResult(
            session_id=session_id,
            route="VECTOR",
            answer="Use «Forgot password» — naïve café.",
            stop_reason="success",
            fallback=None,
            notes=(
                {
                    "node": "router",
                    "route": "VECTOR",
                    "layer": "semantic",
                    "scores": {"VECTOR": 0.71234567, "LLM": 0.1},
                    "why": "nearest example",
                },
                {
                    "node": "plan",
                    "attempt": 1,
                    "target": "router",
                    "ok": True,
                    "phase": "route",
                    "elapsed_ms": 0.123456,
                },
                {
                    "node": "vector",
                    "call": {"query": "reset password", "k": 3},
                    "documents": [{"id": 7, "score": 0.8, "title": "Passwörter"}],
                    "truncated": False,
                    "nothing": None,
                },
            ),
            latency_ms=12.3456789,
            run_id="0123456789abcdef",
        )
    return TurnResult(
        session_id=session_id,
        route="POSTGRES",
        answer="Sorry, I couldn't finish answering that (max_seconds). Please try again.",
        stop_reason="unanswered:tool_error:database_error",
        fallback="tool_error:database_error",
        notes=(
            {
                "node": "gateway",
                "attempt": 1,
                "target": "POSTGRES",
                "ok": False,
                "phase": "delegate",
                "elapsed_ms": 3.0,
                "provenance": {"query": ["user"]},
            },
            {"node": "respond", "mode": "composer", "stopped": "max_seconds", "why": "max_seconds=1 reached"},
        ),
        latency_ms=1000.0005,
        phase="delegate",
        message="the POSTGRES tool gave no answer (tool_error:database_error)",
    )


class ScriptedDesk:
    """A desk whose turn ``ok`` succeeds and any other turn stops, with fixed results; ``bare`` ends the stream
    with the result itself (the form before a turn's last event was a ``FinalEvent``)."""

    def __init__(self, *, bare: bool = False) -> None:
        self.bare = bare
        self.sessions: list[str] = []

    def iter(self, message: str, *, session_id: str, tenant: str = "") -> AsyncIterator[SupportEvent]:
        self.sessions.append(session_id)
        return self._events(_turn(message, session_id), message)

    async def _events(self, turn: TurnResult, message: str) -> AsyncIterator[SupportEvent]:
        yield RouteChosen(route=turn.route, layer="rules", scores={turn.route: 1.0}, why="rule")
        yield ToolUsed(tool="vector", call={"query": message}, summary="1 document", ok=True, evidence=[{"id": 7}])
        yield AnswerToken(turn.answer)
        yield turn if self.bare else FinalEvent(turn)  # bare: a desk of the old form

    async def ask(self, message: str, *, session_id: str, tenant: str = "") -> TurnResult:
        return _turn(message, session_id)

    async def history(self, session_id: str, *, tenant: str = "") -> list[Message]:
        return []

    async def reset(self, session_id: str, *, tenant: str = "") -> None:
        return None

    async def healthy(self) -> bool:
        return True


SUCCESS_FINAL = (
    '{"session_id":"s-1","route":"VECTOR","answer":"Use «Forgot password» — naïve café.","stop_reason":"success",'
    '"fallback":null,"trace":[{"node":"router","route":"VECTOR","layer":"semantic","scores":{"VECTOR":0.71234567,'
    '"LLM":0.1},"why":"nearest example"},{"node":"plan","attempt":1,"target":"router","ok":true,"phase":"route",'
    '"elapsed_ms":0.123456},{"node":"vector","call":{"query":"reset password","k":3},"documents":[{"id":7,'
    '"score":0.8,"title":"Passwörter"}],"truncated":false,"nothing":null}],"latency_ms":12.346'
)
STOPPED_FINAL = (
    '{"session_id":"s-1","route":"POSTGRES","answer":"Sorry, I couldn\'t finish answering that (max_seconds). Please '
    'try again.","stop_reason":"unanswered:tool_error:database_error","fallback":"tool_error:database_error",'
    '"trace":[{"node":"gateway","attempt":1,"target":"POSTGRES","ok":false,"phase":"delegate","elapsed_ms":3.0,'
    '"provenance":{"query":["user"]}},{"node":"respond","mode":"composer","stopped":"max_seconds",'
    '"why":"max_seconds=1 reached"}],"latency_ms":1000.0'
)
DECISION_AND_TOOLS = (
    ',"decision":{{"route":"{route}","layer":"rules","scores":{{"{route}":1.0}},"why":"rule"}},"tools":[{{"tool":'
    '"vector","call":{{"query":"{message}"}},"summary":"1 document","ok":true,"evidence":[{{"id":7}}]}}]}}'
)
CASES = [("ok", "VECTOR", SUCCESS_FINAL), ("stopped", "POSTGRES", STOPPED_FINAL)]


@pytest.fixture
def keyed(desk: ScriptedDesk) -> Iterator[httpx.Client]:
    app_server = ServerThread(_app(desk)).start()
    try:
        with httpx.Client(base_url=app_server.url, timeout=10, headers={"Authorization": f"Bearer {KEY}"}) as c:
            yield c
    finally:
        app_server.stop()


@pytest.fixture
def desk() -> ScriptedDesk:
    return ScriptedDesk()


def _app(desk: ScriptedDesk) -> FastAPI:
    return create_app(desk=desk, settings=Settings(server_api_keys=KEY))


def _final_block(body: bytes) -> bytes:
    (block,) = [b for b in body.split(b"\n\n") if b.startswith(b"event: final\n")]
    return block


@pytest.mark.parametrize(("message", "route", "final"), CASES, ids=["success", "stopped"])
def test_the_final_sse_event_is_the_turns_wire_json_byte_for_byte(
    keyed: httpx.Client, desk: ScriptedDesk, message: str, route: str, final: str
) -> None:
    response = keyed.post("/chat", json={"message": message, "session_id": "s-1"})
    assert response.status_code == 200
    assert _final_block(response.content) == f"event: final\ndata: {final}}}".encode()
    assert desk.sessions[-1].endswith(":s-1") and desk.sessions[-1] != "s-1"  # the wire names the client's session


@pytest.mark.parametrize(("message", "route", "final"), CASES, ids=["success", "stopped"])
def test_the_json_body_is_the_turns_wire_json_then_decision_and_tools_byte_for_byte(
    keyed: httpx.Client, message: str, route: str, final: str
) -> None:
    response = keyed.post(
        "/chat", json={"message": message, "session_id": "s-1"}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 200
    assert response.content == (final + DECISION_AND_TOOLS.format(route=route, message=message)).encode()


def test_the_openai_extension_reads_the_same_result(keyed: httpx.Client) -> None:
    body = {"model": "routegate", "messages": [{"role": "user", "content": "stopped"}], "user": "s-1"}
    response = keyed.post("/v1/chat/completions", json=body)
    assert response.json()["routegate"] == {
        "session_id": "s-1",
        "route": "POSTGRES",
        "stop_reason": "unanswered:tool_error:database_error",
        "fallback": "tool_error:database_error",
        "latency_ms": 1000.0,
    }


def test_a_desk_that_ends_with_a_bare_result_is_served_the_same_bytes_with_a_deprecation_warning() -> None:
    server = ServerThread(_app(ScriptedDesk(bare=True))).start()
    try:
        with (
            httpx.Client(base_url=server.url, timeout=10, headers={"Authorization": f"Bearer {KEY}"}) as client,
            pytest.warns(DeprecationWarning, match=r"ended with a bare TurnResult; end it with FinalEvent\(result\)"),
        ):
            response = client.post("/chat", json={"message": "ok", "session_id": "s-1"})
    finally:
        server.stop()
    assert _final_block(response.content) == f"event: final\ndata: {SUCCESS_FINAL}}}".encode()


def test_a_result_made_the_old_way_is_the_same_on_the_wire() -> None:
    """``TurnResult(trace=<the desk's mappings>)`` (the form before ``notes``) still gives the same wire JSON, for
    one release, with a warning; ``trace`` is then the run's (empty) TraceEntry tuple, as every result's."""
    new = _turn("ok", "s-1")
    with pytest.warns(DeprecationWarning, match=r"TurnResult\(trace=<the desk's mappings>\) is deprecated"):
        old = TurnResult(
            session_id="s-1",
            route="VECTOR",
            answer=new.answer,
            stop_reason="success",
            fallback=None,
            trace=new.notes,
            latency_ms=new.latency_ms,
            run_id=new.run_id,
        )
    assert old.to_dict() == new.to_dict() and old.notes == new.notes and old.trace == ()
    assert json.dumps(old.to_dict(), ensure_ascii=False, separators=(",", ":")) == SUCCESS_FINAL + "}"
