"""Slow clients over raw loopback sockets: a header or body trickled byte by byte, a silent connection and an idle
keep-alive are cut within their bounds (set to 1 s here; the bound is the behaviour under test), and clients
trickling at the same time do not keep a normal client from being served."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from routegate.server import create_app
from routegate.server.serving import GuardedH11Protocol, GuardedHttpToolsProtocol
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings
from server.rawhttp import STEP, closed_by_server, connect, trickle, wait_closed

pytestmark = pytest.mark.e2e

StartServer = Callable[..., ServerThread]
BOUND = 1.0
HEADER = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: trickle\r\nAccept: */*\r\n\r\n"  # 30 s of trickle


@pytest.fixture(params=[GuardedHttpToolsProtocol, GuardedH11Protocol], ids=["httptools", "h11"])
def bounded(request: pytest.FixtureRequest, desk: FakeSupportDesk) -> Iterator[ServerThread]:
    """A server whose bounds are 1 s, with the httptools protocol (the one in use) and the h11 fallback."""
    settings = Settings(
        server_header_timeout_seconds=BOUND, server_body_timeout_seconds=BOUND, server_keepalive_timeout_seconds=1
    )
    with ServerThread(create_app(desk=desk, settings=settings), uvicorn_options={"http": request.param}) as server:
        yield server


def _connect(server: ServerThread) -> socket.socket:
    return connect(server.port)


def test_a_trickled_header_is_cut_within_the_bound(bounded: ServerThread) -> None:
    with _connect(bounded) as sock:
        took, answer = trickle(sock, HEADER)
    assert BOUND * 0.9 <= took < BOUND + 3 * STEP + 1.0  # the whole header would take 30 s
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout")
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request_timeout"
    assert body["error"]["message"] == "the request header did not arrive within 1 s"


def test_a_silent_connection_is_closed_within_the_header_bound(bounded: ServerThread) -> None:
    with _connect(bounded) as sock:
        took, answer = wait_closed(sock)
    assert took < BOUND + 1.5
    assert answer == b""  # nothing was asked, nothing is answered


def test_a_trickled_body_is_cut_within_the_bound(bounded: ServerThread) -> None:
    body = json.dumps({"message": "x" * 60}).encode()
    head = (
        b"POST /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    with _connect(bounded) as sock:
        sock.sendall(head)
        took, answer = trickle(sock, body)
    assert BOUND * 0.9 <= took < BOUND + 3 * STEP + 1.0  # the whole body would take 35 s
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout")
    assert b"the request body did not arrive within 1 s" in answer


def test_an_idle_keep_alive_connection_is_closed(bounded: ServerThread) -> None:
    with _connect(bounded) as sock:
        sock.sendall(HEADER)
        first = sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200 ")
        took, _ = wait_closed(sock)
    assert took < 1 + 1.5


def test_a_slow_but_steady_client_within_the_bounds_is_served(bounded: ServerThread) -> None:
    """Bytes spread over most of the header bound, then the body: served (the bounds are per phase)."""
    body = json.dumps({"message": "status of ticket 1"}).encode()
    head = (
        b"POST /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    with _connect(bounded) as sock:
        half = len(head) // 2
        sock.sendall(head[:half])
        time.sleep(BOUND / 2)  # a slow client, not synchronisation: nothing here waits for the server
        sock.sendall(head[half:])
        time.sleep(BOUND / 2)
        sock.sendall(body)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ")


def test_tricklers_do_not_stop_a_normal_client(start_server: StartServer) -> None:
    server = start_server(server_header_timeout_seconds=60)  # the tricklers stay connected during the test
    stop = threading.Event()
    sockets = [_connect(server) for _ in range(10)]

    def trickle(sock: socket.socket) -> None:
        for byte in HEADER:
            if stop.wait(STEP):
                return
            with contextlib.suppress(OSError):
                sock.sendall(bytes([byte]))

    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in sockets]
    for t in threads:
        t.start()
    try:
        with httpx.Client(base_url=server.url, timeout=5) as c:
            for _ in range(5):
                assert c.get("/healthz").status_code == 200
                chat = c.post("/chat", json={"message": "ticket 1"}, headers={"Accept": "application/json"})
                assert chat.status_code == 200
        assert all(not closed_by_server(s)[0] for s in sockets)  # they were all still connected meanwhile
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
        for s in sockets:
            s.close()


@pytest.fixture
def pipelined(bounded: ServerThread) -> Iterator[socket.socket]:
    with _connect(bounded) as sock:
        yield sock


def test_pipelined_requests_are_served_then_the_connection_idles_out(pipelined: socket.socket) -> None:
    pipelined.sendall(HEADER * 3)
    took, answer = wait_closed(pipelined)
    assert answer.count(b"HTTP/1.1 200 ") == 3
    assert took < 1 + 1.5
