"""``routegate serve`` / ``ui`` / ``up``: the parsers, and ``up`` for real (embedded PostgreSQL + server + UI,
both URLs printed, Ctrl-C stops everything)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from routegate.cli import build_parser
from routegate.cli.serve import _settings, run_serve, run_ui, run_up
from routegate.server.testing import free_port


def test_commands_are_registered() -> None:
    parser = build_parser()
    serve = parser.parse_args(["serve", "--host", "0.0.0.0", "--port", "9000"])
    assert serve.handler is run_serve
    settings = _settings(serve)
    assert (settings.server_host, settings.server_port) == ("0.0.0.0", 9000)
    up = parser.parse_args(["up", "--ui-port", "9001"])
    assert up.handler is run_up
    assert _settings(up).ui_port == 9001
    assert parser.parse_args(["ui", "--server-url", "http://127.0.0.1:1"]).handler is run_ui


SLOW_CLIENT_BOUND = {"ROUTEGATE_SERVER_HEADER_TIMEOUT_SECONDS": "1"}


def assert_cuts_a_silent_client(port: int) -> None:
    """The server started this way bounds the header wait (1 s here): a connection that sends nothing is closed."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""  # closed by the server (the socket timeout of 10 s would raise instead)
        assert time.monotonic() - started < 5


@pytest.fixture
def data_dir() -> Iterator[Path]:
    import shutil
    import tempfile

    # outside /tmp/pytest-of-<user>, which a concurrent pytest run may rotate away under PostgreSQL
    path = Path(tempfile.mkdtemp(prefix="routegate-up-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.integration
def test_up_starts_everything_and_ctrl_c_stops_it(data_dir: Path) -> None:
    port, ui_port = free_port(), free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1", **SLOW_CLIENT_BOUND)
    cmd = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "up", "--port", str(port), "--ui-port", str(ui_port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C would address
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not any("Ctrl-C stops everything" in line for line in lines):  # readiness, bounded
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError("routegate up exited early:\n" + "".join(lines))
            lines.append(line)
            assert time.monotonic() < deadline, "routegate up did not get ready in 120 s:\n" + "".join(lines)
        text = "".join(lines)
        assert re.search(rf"routegate server: http://127\.0\.0\.1:{port}\b", text)
        assert re.search(rf"routegate UI: +http://127\.0\.0\.1:{ui_port}\b", text)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{ui_port}/_stcore/health", timeout=10).status_code == 200
        answer = httpx.post(
            f"http://127.0.0.1:{port}/chat",
            json={"message": "What is the status of ticket 1?"},
            headers={"Accept": "application/json"},
            timeout=30,
        ).json()
        assert answer["route"] == "POSTGRES"
        assert_cuts_a_silent_client(port)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, text + rest  # 128 + SIGINT
        assert "routegate: stopped." in rest
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{ui_port}/_stcore/health", timeout=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.e2e
@pytest.mark.integration
def test_serve_with_two_workers(data_dir: Path) -> None:
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1", **SLOW_CLIENT_BOUND)
    cmd = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # readiness probe, bounded
            assert proc.poll() is None, proc.communicate()[0]
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the workers did not get ready in 120 s"
            time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as c:
            json_mode = {"Accept": "application/json"}
            for i in range(4):  # a session's turns may land on either worker: the memory is in PostgreSQL
                body = {"message": f"What is the status of ticket {i % 3 + 1}?", "session_id": "w"}
                assert c.post("/chat", json=body, headers=json_mode).json()["route"] == "POSTGRES"
            assert len(c.get("/sessions/w").json()["messages"]) == 8
            assert c.get("/plan").json()["nodes"]  # the desk the worker opened, with its plan
            # /v1 without a session: the worker's desk reads the client's conversation (the built-in configured desk)
            said = [
                {"role": "user", "content": "Which city is customer 2 from?"},
                {"role": "assistant", "content": "?"},
            ]
            body = {"model": "m", "messages": [*said, {"role": "user", "content": "and what about his tickets?"}]}
            answer = c.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
            assert "Jane Smith" in answer and "John Doe" not in answer, answer
        assert_cuts_a_silent_client(port)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, out  # 128 + SIGINT, as without --workers
        assert "routegate: stopped." in out
        assert len(re.findall(r"^routegate: worker \d+ ready$", out, re.M)) == 2, out  # each worker, once serving
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
