"""Raw loopback HTTP for the tests that act as a misbehaving client: heads sent whole or trickled, answers read
until the server closes, and the server's memory read from /proc."""

from __future__ import annotations

import contextlib
import re
import select
import socket
import time
from collections.abc import Callable
from pathlib import Path

STEP = 0.5  # a trickling client sends one byte every STEP seconds


def connect(port: int, host: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection((host, port), timeout=10)


def closed_by_server(sock: socket.socket) -> tuple[bool, bytes]:
    """Non-blocking look: has the server closed ``sock``? Returns (closed, bytes it sent before closing)."""
    received = b""
    while select.select([sock], [], [], 0)[0]:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


def trickle(sock: socket.socket, data: bytes, *, step: float = STEP, limit: float = 15.0) -> tuple[float, bytes]:
    """Send ``data`` one byte every ``step`` seconds until the server closes the socket; (seconds taken, its
    answer). Fails when the server keeps the connection open for ``limit`` seconds."""
    started = time.monotonic()
    answer = b""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started, answer
        if select.select([sock], [], [], step)[0]:
            closed, got = closed_by_server(sock)
            answer += got
            if closed:
                return time.monotonic() - started, answer
        if time.monotonic() - started > limit:
            break
    raise AssertionError(f"the server kept a trickling connection open for {time.monotonic() - started:.1f} s")


def wait_closed(sock: socket.socket, *, limit: float = 15.0) -> tuple[float, bytes]:
    """Wait (at most ``limit`` seconds) for the server to close ``sock``; (seconds taken, what it sent)."""
    started = time.monotonic()
    answer = b""
    while time.monotonic() - started < limit:
        if select.select([sock], [], [], 0.1)[0]:
            closed, got = closed_by_server(sock)
            answer += got
            if closed:
                return time.monotonic() - started, answer
    raise AssertionError(f"the server kept the connection open for {limit} s")


def exchange(port: int, request: bytes, *, limit: float = 15.0) -> bytes:
    """Send ``request`` whole on a new connection; everything the server answers until it closes."""
    with connect(port) as sock:
        return exchange_on(sock, request, limit=limit)


def exchange_on(sock: socket.socket, request: bytes, *, limit: float = 15.0) -> bytes:
    """Send ``request`` whole on ``sock``; everything the server answers until it closes. A server that refuses
    the request before reading all of it may reset the connection: what arrived before counts."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(request)
    return wait_closed(sock, limit=limit)[1]


def statuses(answer: bytes) -> list[int]:
    """The status codes of the HTTP/1.1 responses in ``answer``, in order."""
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]


def get(path: bytes = b"/healthz", *, headers: bytes = b"", close: bool = True) -> bytes:
    """A GET request's bytes, with extra header lines (``b"Name: value\\r\\n"...``)."""
    connection = b"Connection: close\r\n" if close else b""
    return b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + connection + b"\r\n"


# -- memory of server processes (Linux /proc) ------------------------------------------------------------------


def descendants(root: int) -> set[int]:
    """Every live process below ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def peak_growth_kib(pids: set[int], action: Callable[[], object]) -> int:
    """How far above their resident memory at the start the processes' peak resident memory (``VmHWM``) rose
    while ``action`` ran, in KiB, summed over ``pids``."""
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak restarts from the resident memory now
    before = sum(_status_kib(pid, "VmRSS") for pid in pids)
    action()
    return sum(_status_kib(pid, "VmHWM") for pid in pids) - before


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")
