"""The UI's HTTP client: SSE decoding (property: whatever the server encodes, the client decodes the same)
and error reporting against a running server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.server._sse import encode_event
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.ui import ChatClient, ChatClientError
from routegate.ui.client import iter_sse

_payloads = st.dictionaries(
    st.text(max_size=8),
    st.none() | st.booleans() | st.integers() | st.text() | st.lists(st.text(max_size=5), max_size=3),
    max_size=4,
)


@given(events=st.lists(st.tuples(st.sampled_from(["route", "tool", "token", "final", "error"]), _payloads), max_size=6))
def test_what_the_server_encodes_the_client_decodes(events: list[tuple[str, dict[str, Any]]]) -> None:
    wire = b"".join(encode_event(name, data) for name, data in events).decode("utf-8", "replace")
    # lone surrogates cannot cross the wire: compare with what survives UTF-8 encoding
    expected = [(name, _utf8(data)) for name, data in events]
    assert [(e.event, e.data) for e in iter_sse(wire.split("\n"))] == expected


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


def test_comments_and_unknown_fields_are_skipped() -> None:
    lines = [": keep-alive", "id: 7", "retry: 1000", "event: token", 'data: {"text": "hi"}', ""]
    assert [(e.event, e.data) for e in iter_sse(lines)] == [("token", {"text": "hi"})]


@pytest.mark.e2e
def test_client_streams_and_reports_errors(server: ServerThread, desk: FakeSupportDesk) -> None:
    with ChatClient(server.url) as client:
        events = list(client.stream("ticket 1", session_id="c1"))
        assert [e.event for e in events][:2] == ["route", "tool"]
        assert events[-1].event == "final"
        assert [m["role"] for m in client.history("c1")] == ["user", "assistant"]
        client.reset("c1")
        assert client.history("c1") == []
        with pytest.raises(ChatClientError, match="message is empty") as caught:
            list(client.stream(" ", session_id="c1"))
        assert caught.value.status == 422
        desk.database_up = False
        with pytest.raises(ChatClientError, match="database is unavailable") as down:
            list(client.stream("ticket 1", session_id="c1"))
        assert down.value.status == 503


def test_unreachable_server_is_a_clear_error() -> None:
    with ChatClient("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(ChatClientError, match="cannot be reached") as caught:
            list(client.stream("hi", session_id="x"))
        assert caught.value.status == 0
        assert client.health()["status"] == "unreachable"
