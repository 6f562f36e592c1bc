"""Processes stop when the user stops them: Ctrl-C (SIGINT to the process group, as a terminal sends it) or
SIGTERM stops everything a command started — the server, the UI, the embedded PostgreSQL — and the command exits
130/143 with one line; a user of the embedded PostgreSQL killed with SIGKILL does not keep it running forever.

Checked from outside: the process table (/proc) and the ports, never a flag of the code under test."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from routegate.apps.support.db import EmbeddedPostgres
from routegate.server.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
pytestmark = [pytest.mark.integration, pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # outside /tmp/pytest-of-<user>, which a concurrent pytest run may rotate away under PostgreSQL
    path = Path(tempfile.mkdtemp(prefix="routegate-life-"))
    yield path
    for pid in processes_mentioning(str(path)):  # never leave a server behind, whatever the test found
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def processes_mentioning(*needles: str) -> list[int]:
    """PIDs (not this one) whose command line contains one of ``needles``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(needle in cmdline for needle in needles):
            found.append(int(entry.name))
    return found


def wait_until_gone(*needles: str, within: float = 30.0) -> list[int]:
    """Poll /proc until no process mentions ``needles`` (bounded); the survivors, if any."""
    deadline = time.monotonic() + within
    while (left := processes_mentioning(*needles)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def read_until(stream: object, marker: str, proc: subprocess.Popen[str], within: float = 120.0) -> str:
    """Lines of ``stream`` up to the one containing ``marker`` (bounded; fails if the process exits first)."""
    lines: list[str] = []
    deadline = time.monotonic() + within
    while not any(marker in line for line in lines):
        line = stream.readline()  # type: ignore[attr-defined]
        if not line and proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode} before {marker!r}:\n" + "".join(lines))
        lines.append(line)
        assert time.monotonic() < deadline, f"no {marker!r} within {within} s:\n" + "".join(lines)
    return "".join(lines)


def test_a_sigkilled_user_does_not_keep_postgres_running(data_dir: Path) -> None:
    pg_dir = data_dir / "support-pg"
    user = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from routegate.apps.support.db import EmbeddedPostgres; "
            f"EmbeddedPostgres(Path({str(pg_dir)!r})).start(); print('ready', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert user.stdout is not None
    assert user.stdout.readline().strip() == "ready"
    postmaster = int((pg_dir / "postmaster.pid").read_text().split()[0])
    user.kill()  # SIGKILL: no atexit, no clean-up; its PID stays in the handle file
    user.communicate(timeout=10)
    assert str(user.pid) in (pg_dir / ".handle_pids.json").read_text()

    server = EmbeddedPostgres(pg_dir)
    server.start()
    server.stop()  # the last live user leaves: the server must really stop

    deadline = time.monotonic() + 30
    while Path(f"/proc/{postmaster}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{postmaster}").exists(), "PostgreSQL kept running after its last live user left"
    assert wait_until_gone(str(pg_dir)) == []


@pytest.mark.parametrize(
    ("signum", "status", "line"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_chat_stops_postgres_on_a_signal(data_dir: Path, signum: int, status: int, line: str) -> None:
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [*CLI, "chat"],
        env=env,
        stdin=subprocess.PIPE,  # left open: chat waits at its prompt
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        read_until(proc.stderr, "routegate support desk", proc)
        assert processes_mentioning(str(data_dir)), "the embedded PostgreSQL should be running now"
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == status, err
        assert err.strip().splitlines() == [line], err
        assert "Traceback" not in err
        assert wait_until_gone(str(data_dir)) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_dev_py_run_stops_everything(data_dir: Path, signum: int) -> None:
    """``python3 dev.py run up``: Ctrl-C to its process group (as a terminal sends it), or SIGTERM to dev.py
    alone; nothing of it remains and the ports are free."""
    if not (ROOT / ".venv" / ".routegate-install-stamp").exists():
        pytest.skip("dev.py run would install the virtual environment first")
    port, ui_port = free_port(), free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "dev.py"), "run", "up", "--port", str(port), "--ui-port", str(ui_port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, the one a terminal's Ctrl-C addresses
    )
    needles = (str(data_dir), f"--server.port={ui_port}", f"--port {port}")
    try:
        read_until(proc.stdout, "Ctrl-C stops everything", proc)
        assert accepts(port) and accepts(ui_port)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)  # `kill <dev.py>`: only dev.py gets it
        rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 128 + signum, rest
        assert "Traceback" not in rest
        assert f"[dev] stopped by {signal.Signals(signum).name}" in rest
        assert wait_until_gone(*needles) == []
        assert not accepts(port) and not accepts(ui_port)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.e2e
def test_ui_stops_streamlit_on_sigterm(data_dir: Path) -> None:
    ui_port = free_port()
    proc = subprocess.Popen(
        [*CLI, "ui", "--port", str(ui_port), "--server-url", "http://127.0.0.1:9"],
        env=dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    needle = f"--server.port={ui_port}"
    try:
        read_until(proc.stdout, "routegate UI:", proc)
        deadline = time.monotonic() + 60
        while not accepts(ui_port):  # Streamlit listening, bounded
            assert proc.poll() is None and time.monotonic() < deadline, "the UI did not start"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)  # to `routegate ui` only, as `kill` does
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 143, rest
        assert "terminated" in rest and "Traceback" not in rest
        assert wait_until_gone(needle) == []
        assert not accepts(ui_port)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` (children, grandchildren, ...), from the process table."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("signum", "status", "to_group"), [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)], ids=["ctrl-c", "kill"]
)
def test_serve_with_workers_stops_them_all_and_exits_with_the_signal(
    data_dir: Path, signum: int, status: int, to_group: bool
) -> None:
    """``serve --workers 2``: Ctrl-C (SIGINT to the process group) exits 130, SIGTERM to the supervisor alone
    (``kill``) 143; every worker process and the embedded PostgreSQL are gone and the port is free."""
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        read_until(proc.stdout, "routegate server:", proc)
        deadline = time.monotonic() + 120
        while not (accepts(port) and len(workers := descendants(proc.pid)) >= 2):  # listening, bounded
            assert proc.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        assert processes_mentioning(str(data_dir)), "the embedded PostgreSQL should be running now"
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == status, rest
        assert "Traceback" not in rest
        assert rest.strip().splitlines()[-1] == "routegate: stopped.", rest
        deadline = time.monotonic() + 30
        while running(workers) and time.monotonic() < deadline:  # bounded
            time.sleep(0.1)
        assert running(workers) == set(), "worker processes outlived the command"
        assert wait_until_gone(str(data_dir)) == []
        assert not accepts(port)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.e2e
def test_a_second_ctrl_c_ends_an_open_stream_with_an_error_event(data_dir: Path) -> None:
    """``routegate serve`` with a turn in flight (the LLM never answers): the first Ctrl-C stops accepting and
    waits for it, the second stops waiting; the client's stream still ends with an ``error`` event, and the server
    prints no traceback."""
    from routegate.server.testing import parse_sse, serve_process
    from routegate.testing import ScriptedOpenAIServer
    from routegate.testing.steps import Hang

    received: list[str] = []
    routed = threading.Event()

    def read_stream(url: str) -> None:
        body = {"message": "What is the status of ticket 1?"}
        with httpx.stream("POST", f"{url}/chat", json=body, timeout=120) as response:
            for line in response.iter_lines():
                received.append(line)
                if line == "event: route":
                    routed.set()

    stderr_file = data_dir / "serve.stderr"
    with ScriptedOpenAIServer(fallback=Hang()) as llm, stderr_file.open("wb") as stderr:
        env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), OPENAI_API_KEY=llm.api_key)
        env |= {"OPENAI_BASE_URL": llm.base_url, "ROUTEGATE_OPENAI_MAX_RETRIES": "0"}
        env.pop("DATABASE_URL", None)
        with serve_process(env=env, stderr=stderr, start_timeout=240) as (url, proc):
            reader = threading.Thread(target=read_stream, args=(url,))
            reader.start()
            assert routed.wait(60), received  # the turn is under way: the LLM holds it
            os.killpg(proc.pid, signal.SIGINT)
            port = int(url.rsplit(":", 1)[1])
            deadline = time.monotonic() + 30
            while accepts(port):  # the first Ctrl-C was handled: no new connections, bounded
                assert time.monotonic() < deadline, "the server still accepts connections after Ctrl-C"
                time.sleep(0.05)
            assert reader.is_alive()  # the open stream is waited for
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
            reader.join(60)
    events = parse_sse("\n".join(received) + "\n")
    assert events[0][0] == "route"
    assert events[-1][0] == "error" and events[-1][1]["code"] == "server_shutting_down", events
    assert proc.returncode == 130
    err = stderr_file.read_text(errors="replace")
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert wait_until_gone(str(data_dir)) == []
