"""``routegate serve --ray`` bounds its HTTP connections as ``routegate serve`` does, from outside over raw loopback
sockets to Ray Serve's proxy: over-long heads are 414/431 and the proxy's memory does not follow eight concurrent
1 MiB headers; a trickled header or body is cut with 408 at its deadline (twelve trickling clients at once, the
case that once held every one open); a body over the limit is 413; and a normal client is still served."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from routegate.server.testing import free_port, wait_until_serving
from server.rawhttp import connect, descendants, exchange, get, peak_growth_kib, statuses, trickle

pytest.importorskip("ray", reason="needs the routegate[ray] extra")

T = TypeVar("T")
MIB = 1024 * 1024
BOUND = 1  # seconds: the header and body deadlines under test
BURST = 8
PEAK_BOUND_KIB = BURST * 1024 // 2  # half the headers' size (as for `routegate serve`)


def _proxies(root: int) -> set[int]:
    found = set()
    for pid in descendants(root):
        try:
            if b"ProxyActor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            pass
    return found


def _concurrently(count: int, work: Callable[[int], T]) -> list[T]:
    """``work(0)`` ... ``work(count - 1)`` in threads at once; their results in order."""
    results: dict[int, T] = {}

    def one(n: int) -> None:
        results[n] = work(n)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return [results[n] for n in range(count)]


@pytest.mark.e2e
@pytest.mark.integration
def test_serve_on_ray_bounds_heads_bodies_and_slow_clients(data_dir: Path) -> None:
    port = free_port()
    env = dict(
        os.environ,
        ROUTEGATE_DATA_DIR=str(data_dir),
        ROUTEGATE_SERVER_HEADER_TIMEOUT_SECONDS=str(BOUND),
        ROUTEGATE_SERVER_BODY_TIMEOUT_SECONDS=str(BOUND),
        PYTHONUNBUFFERED="1",
    )
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", None)
    env.pop("OPENAI_API_KEY", None)
    cmd = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--ray", "--replicas", "1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    started: set[int] = set()
    try:
        wait_until_serving(f"{url}/healthz", proc, timeout=240)
        started = descendants(proc.pid)
        proxies = _proxies(proc.pid)
        assert len(proxies) == 1, proxies

        big = get(b"/chat", headers=b"X-Big: " + b"a" * MIB + b"\r\n")
        assert _concurrently(BURST, lambda n: statuses(exchange(port, big))) == [[431]] * BURST  # warm-up
        answers: list[bytes] = []
        growth = peak_growth_kib(proxies, lambda: answers.extend(_concurrently(BURST, lambda n: exchange(port, big))))
        assert [statuses(a) for a in answers] == [[431]] * BURST
        print(f"proxy peak memory growth over {BURST} concurrent 1 MiB headers: {growth} KiB")
        assert growth < PEAK_BOUND_KIB, f"{BURST} x 1 MiB headers raised the proxy's peak memory by {growth} KiB"
        fields = b"".join(b"X-%03d: v\r\n" % i for i in range(200))
        assert statuses(exchange(port, get(headers=fields))) == [431]
        assert statuses(exchange(port, get(b"/healthz?q=" + b"a" * 64 * 1024))) == [414]

        def trickled_header(n: int) -> tuple[float, bytes]:
            with connect(port) as sock:
                return trickle(sock, get(), step=0.25)

        for took, answer in _concurrently(12, trickled_header):
            assert statuses(answer) == [408] and took < BOUND + 2.0, (took, answer)
            assert b"the request header did not arrive within 1 s" in answer

        body = json.dumps({"message": "x" * 60}).encode()
        head = b"POST /chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        with connect(port) as sock:
            sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body))
            took, answer = trickle(sock, body, step=0.25)
        assert statuses(answer) == [408] and took < BOUND + 2.0, (took, answer)
        assert b"the request body did not arrive within 1 s" in answer

        large = httpx.post(f"{url}/chat", content=b'{"message": "' + b"x" * 70_000 + b'"}', timeout=30)
        assert large.status_code == 413 and large.json()["error"]["code"] == "request_too_large"
        assert httpx.get(f"{url}/healthz", timeout=30).json()["status"] == "ok"  # a normal client: served

        started |= descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):  # a failed test leaves no open pipe to a later one
            if pipe is not None:
                pipe.close()
        for pid in started:  # never leave a Ray daemon of this test behind a failed test
            with contextlib.suppress(OSError):
                if b"ray" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
