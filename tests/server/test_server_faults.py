"""Faults with the fake desk: a client leaving mid-stream leaves no task, lock or open desk stream behind."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from routegate.server.testing import FakeSupportDesk, ServerThread

pytestmark = pytest.mark.e2e


def wait_until(condition: Callable[[], bool], *, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)


@pytest.mark.parametrize("path", ["/chat", "/v1/chat/completions"])
def test_client_disconnect_mid_stream_leaks_nothing(server: ServerThread, desk: FakeSupportDesk, path: str) -> None:
    baseline = server.tasks()
    desk.stall_after_tokens = 2
    body = (
        {"message": "ticket 1", "session_id": "gone"}
        if path == "/chat"
        else {"model": "m", "messages": [{"role": "user", "content": "ticket 1"}], "stream": True, "user": "gone"}
    )
    for _ in range(3):
        with httpx.Client(base_url=server.url, timeout=10) as c, c.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            seen = ""
            for chunk in response.iter_text():
                seen += chunk
                if "answer" in seen:  # the second token: the desk now stalls, its stream is open
                    assert desk.active_streams == 1
                    break
            assert "answer" in seen
        # leaving the loop and the with-blocks closed the connection mid-stream
        wait_until(lambda: desk.active_streams == 0, what="the desk stream to be closed")
    wait_until(lambda: server.tasks() <= baseline, what="the server's task count to return to its baseline")
    services = server.app.state.services
    assert len(services.locks) == 0
    assert desk.histories == {}  # an abandoned turn is not stored by this desk
    desk.stall_after_tokens = None
    with httpx.Client(base_url=server.url, timeout=10) as c:  # the session is not stuck behind a lock
        assert (
            c.post(
                "/chat", json={"message": "hi", "session_id": "gone"}, headers={"Accept": "application/json"}
            ).status_code
            == 200
        )
