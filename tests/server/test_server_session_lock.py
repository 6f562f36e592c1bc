"""One lock per session: around a desk that serialises its sessions itself (``SerialisesSessions``, as the support
desk does on PostgreSQL) the server adds no lock of its own; around one that does not (the fake desk) it queues a
session's turns in process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from routegate.apps.support.contracts import SerialisesSessions
from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e


@dataclass
class SerialisingDesk(FakeSupportDesk):
    """The fake desk declaring that it serialises its sessions (it does not: the test sees what the server does)."""

    def serialises_sessions(self) -> bool:
        return True

    def sessions_held(self) -> int:
        return self.active_streams


def wait_until(condition: Callable[[], bool], *, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)


@contextmanager
def stalled_turns(server: ServerThread, count: int) -> Iterator[list[str]]:
    """``count`` streamed turns of one session, each stalled by the desk after its first token (or held back by the
    server before the desk sees it), open until the block ends."""
    release = threading.Event()
    seen: list[str] = []

    def turn() -> None:
        with (
            httpx.Client(base_url=server.url, timeout=30) as c,
            c.stream("POST", "/chat", json={"message": "ticket 1", "session_id": "one"}) as response,
        ):
            lines = response.iter_lines()  # kept: a line iterator that is closed closes the connection
            for line in lines:
                if line.startswith("event: token"):
                    seen.append(line)
                    break
            release.wait(30)
            lines.close()

    threads = [threading.Thread(target=turn) for _ in range(count)]
    for t in threads:
        t.start()
    try:
        yield seen
    finally:
        release.set()
        for t in threads:
            t.join(timeout=30)


def test_around_a_desk_that_serialises_its_sessions_the_server_holds_no_lock() -> None:
    desk = SerialisingDesk(stall_after_tokens=1)
    assert isinstance(desk, SerialisesSessions)
    server = ServerThread(create_app(desk=desk, settings=Settings())).start()
    try:
        services = server.app.state.services
        with stalled_turns(server, 2) as seen:
            wait_until(lambda: desk.active_streams == 2, what="both turns of the session at the desk")
            wait_until(lambda: len(seen) == 2, what="both turns streaming")
            assert len(services.locks) == 2  # the desk's count: the server keeps none of its own
        wait_until(lambda: desk.active_streams == 0, what="the desk's streams closed")
        assert len(services.locks) == 0
    finally:
        server.stop()


def test_around_a_desk_that_does_not_the_server_runs_a_session_one_turn_at_a_time() -> None:
    desk = FakeSupportDesk(stall_after_tokens=1)
    assert not isinstance(desk, SerialisesSessions)
    server = ServerThread(create_app(desk=desk, settings=Settings())).start()
    try:
        services = server.app.state.services
        with stalled_turns(server, 2) as seen:
            wait_until(lambda: len(seen) == 1, what="the first turn streaming")
            wait_until(lambda: len(services.locks) == 1, what="the session queued in the server")
            assert desk.active_streams == 1  # the second turn waits in the server, not at the desk
        wait_until(lambda: desk.active_streams == 0 and len(services.locks) == 0, what="everything let go")
    finally:
        server.stop()
