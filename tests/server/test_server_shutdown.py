"""When the server goes away under open requests (``end_open_requests``, what ``routegate serve`` calls after a
second Ctrl-C), each ends with an answer: an open ``/chat`` stream with an ``error`` event
``server_shutting_down``, an OpenAI stream with an error chunk and ``[DONE]``, a JSON turn with 503; a request
arriving after that gets 503 too. Checked over HTTP against a desk that stalls mid-answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from routegate.server import create_app
from routegate.server.app import end_open_requests
from routegate.server.testing import FakeSupportDesk, ServerThread, parse_sse
from routegate.settings import Settings

WITHIN = 30.0


@pytest.fixture
def stalled() -> Iterator[tuple[ServerThread, FakeSupportDesk]]:
    desk = FakeSupportDesk(stall_after_tokens=1)
    with ServerThread(create_app(desk=desk, settings=Settings())) as server:
        yield server, desk


def end_requests(server: ServerThread) -> None:
    assert server.loop is not None
    server.loop.call_soon_threadsafe(end_open_requests, server.app)


def stream_until_stalled(server: ServerThread, path: str, body: dict[str, object], marker: str) -> list[str]:
    """Open a stream, read until ``marker`` (the desk stalls after it), end the open requests, read the rest."""
    lines: list[str] = []
    with httpx.stream("POST", f"{server.url}{path}", json=body, timeout=WITHIN) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            lines.append(line)
            if marker in line:
                end_requests(server)
    return lines


def test_an_open_chat_stream_ends_with_an_error_event(stalled: tuple[ServerThread, FakeSupportDesk]) -> None:
    server, desk = stalled
    lines = stream_until_stalled(server, "/chat", {"message": "weather in Oslo?"}, "event: token")
    events = parse_sse("\n".join(lines) + "\n")
    assert [name for name, _ in events][:3] == ["route", "tool", "token"]
    assert events[-1] == (
        "error",
        {
            "code": "server_shutting_down",
            "message": "the server is shutting down; send the request again once it is back",
        },
    )
    deadline = time.monotonic() + WITHIN
    while desk.active_streams and time.monotonic() < deadline:  # the desk's stream was closed, bounded
        time.sleep(0.01)
    assert desk.active_streams == 0


def test_an_open_openai_stream_ends_with_an_error_chunk_and_done(
    stalled: tuple[ServerThread, FakeSupportDesk],
) -> None:
    server, _ = stalled
    body = {"model": "routegate-support", "stream": True, "messages": [{"role": "user", "content": "weather?"}]}
    lines = stream_until_stalled(server, "/v1/chat/completions", body, '"content":"[')
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert json.loads(data[-2])["error"]["code"] == "server_shutting_down"


def test_a_json_turn_in_flight_and_a_late_request_get_503(stalled: tuple[ServerThread, FakeSupportDesk]) -> None:
    server, desk = stalled
    answers: list[httpx.Response] = []

    def ask() -> None:
        answers.append(
            httpx.post(
                f"{server.url}/chat",
                json={"message": "weather?"},
                headers={"Accept": "application/json"},
                timeout=WITHIN,
            )
        )

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + WITHIN
    while not desk.active_streams:  # the turn is under way in the desk, bounded
        assert time.monotonic() < deadline and asking.is_alive()
        time.sleep(0.01)
    end_requests(server)
    asking.join(WITHIN)
    (answer,) = answers
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert answer.json()["error"]["code"] == "server_shutting_down"
    late = httpx.get(f"{server.url}/healthz", timeout=WITHIN)
    assert late.status_code == 503 and late.json()["error"]["code"] == "server_shutting_down"
