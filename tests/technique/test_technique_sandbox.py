"""The sandboxed runner: each failure mode ends with a clear stop reason, quickly (short limits)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from routegate.errors import ConfigurationError
from routegate.technique.sandbox import CodeRun, SandboxLimits, SandboxRunner

QUICK = SandboxLimits(wall_seconds=15, cpu_seconds=1, memory_bytes=256 * 1024 * 1024, max_file_bytes=1024 * 1024)
RUNNER = SandboxRunner(limits=QUICK)


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on loopback in the test's own network namespace."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _exists(path: Path) -> bool:
    return path.exists()


def _sandbox_processes() -> list[int]:
    """Live processes running under a per-run sandbox uid (1,000,000-1,999,999)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path("/proc", entry, "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            uid = int(fields.get("Uid", "0").split()[0])
            if 1_000_000 <= uid < 2_000_000 and not fields.get("State", "").strip().startswith("Z"):
                found.append(int(entry))
    return found


def _sandbox_dirs() -> set[str]:
    return {name for name in os.listdir("/tmp") if name.startswith("routegate-sandbox-")}


async def test_prints_and_exits_cleanly() -> None:
    before = _sandbox_dirs()
    run = await RUNNER.run("import sys\nprint('hello', sys.flags.isolated)\nprint('to stderr', file=sys.stderr)")
    assert (run.stop_reason, run.exit_code, run.stdout, run.stderr) == ("success", 0, "hello 1\n", "to stderr\n")
    assert run.ok
    assert "guard" in run.isolation
    assert _sandbox_dirs() == before  # working and output directories are removed


async def test_an_exception_is_a_nonzero_exit_with_a_clean_traceback() -> None:
    run = await RUNNER.run("def f():\n    return 1 / 0\n\nf()\n")
    assert run.stop_reason == "sandbox_exit:1"
    assert run.stderr.startswith('Traceback (most recent call last):\n  File "main.py", line 4')
    assert run.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "<string>" not in run.stderr


async def test_sys_exit_status_is_kept() -> None:
    run = await RUNNER.run("raise SystemExit(3)")
    assert (run.stop_reason, run.exit_code) == ("sandbox_exit:3", 3)


async def test_infinite_loop_hits_the_cpu_limit() -> None:
    run = await RUNNER.run("while True:\n    pass\n")
    assert run.stop_reason == "sandbox_timeout:cpu"
    assert "cpu_seconds=1" in run.message


async def test_sleeping_forever_hits_the_wall_clock_limit() -> None:
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=0.5, cpu_seconds=1))
    run = await runner.run("import time\nwhile True:\n    time.sleep(1)\n")
    assert run.stop_reason == "sandbox_timeout:wall"
    assert run.exit_code == -9


async def test_fork_bomb_is_stopped() -> None:
    run = await RUNNER.run("import os\nwhile True:\n    os.fork()\n")
    assert run.stop_reason == "sandbox_processes:limit"
    assert _sandbox_processes() == []  # every process of the run's uid was killed


async def test_a_cancelled_run_leaves_nothing_behind() -> None:
    before = _sandbox_dirs()
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(20)\n"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(RUNNER.run(code), 1.0)
    assert _sandbox_processes() == []
    assert _sandbox_dirs() == before


async def test_large_allocation_hits_the_memory_limit() -> None:
    run = await RUNNER.run("block = bytearray(4 * 1024 ** 3)\n")
    assert run.stop_reason == "sandbox_memory:limit"
    assert "memory limit" in run.message


async def test_network_access_is_refused(listener: int) -> None:
    run = await RUNNER.run(f"import socket\nsocket.create_connection(('127.0.0.1', {listener}), timeout=2)\n")
    assert run.stop_reason == "sandbox_network:blocked"
    assert "network access is not allowed" in run.stderr


async def test_name_resolution_is_refused() -> None:
    run = await RUNNER.run("import socket\nsocket.getaddrinfo('localhost', 80)\n")
    assert run.stop_reason == "sandbox_network:blocked"


async def test_a_caught_refusal_is_still_reported(listener: int) -> None:
    code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {listener}))\nexcept OSError:\n    print('swallowed')\n"
    run = await RUNNER.run(code)
    assert run.stdout == "swallowed\n"
    assert run.stop_reason == "sandbox_network:blocked"


async def test_the_network_namespace_blocks_without_the_guard(listener: int) -> None:
    runner = SandboxRunner(limits=QUICK, guard=False)
    code = (
        "import socket\ntry:\n"
        f"    socket.create_connection(('127.0.0.1', {listener}), timeout=2)\n    print('connected')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
    )
    run = await runner.run(code)
    if "netns" not in run.isolation:
        pytest.skip("no network namespace here (not root or no CAP_SYS_ADMIN): the guard is the only layer")
    assert run.stdout.startswith("refused")
    assert "guard" not in run.isolation


async def test_writing_outside_the_working_directory_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    run = await RUNNER.run(f"open({str(target)!r}, 'w').write('x')\n")
    assert run.stop_reason == "sandbox_filesystem:write_outside"
    assert not _exists(target)
    shared_tmp = Path("/tmp", f"routegate-escape-{os.getpid()}")
    run = await RUNNER.run(f"import os\nos.mkdir({str(shared_tmp)!r})\n")
    assert run.stop_reason == "sandbox_filesystem:write_outside"
    assert not _exists(shared_tmp)


async def test_the_uid_blocks_writes_without_the_guard(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    run = await SandboxRunner(limits=QUICK, guard=False).run(
        f"try:\n    open({str(target)!r}, 'w')\n    print('written')\nexcept PermissionError:\n    print('denied')\n"
    )
    if "uid" not in run.isolation:
        pytest.skip("not root here: no per-run uid, the guard is the only layer")
    assert run.stdout == "denied\n"
    assert not _exists(target)


async def test_files_inside_the_working_directory_are_fine() -> None:
    run = await RUNNER.run(
        "import os\nopen('notes.txt', 'w').write('kept')\nprint(open('notes.txt').read(), os.listdir('.'))"
    )
    assert run.stop_reason == "success"
    assert run.stdout == "kept ['main.py', 'notes.txt']\n"


async def test_running_other_programs_is_refused() -> None:
    run = await RUNNER.run("import subprocess\nsubprocess.run(['id'])\n")
    assert run.stop_reason == "sandbox_processes:exec_blocked"
    run = await RUNNER.run("import os\nos.system('id')\n")
    assert run.stop_reason == "sandbox_processes:exec_blocked"


async def test_native_code_is_refused() -> None:
    run = await RUNNER.run("import ctypes\nctypes.CDLL(None).getpid()\n")
    assert run.stop_reason == "sandbox_native:blocked"


async def test_output_flood_hits_the_file_size_limit() -> None:
    run = await RUNNER.run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert run.stop_reason == "sandbox_filesize:limit"
    assert run.truncated
    assert len(run.stdout) == QUICK.max_output_chars


async def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_TEST_SECRET", "hunter2")
    run = await RUNNER.run("import os\nprint(sorted(os.environ))\n")
    assert run.stdout == "['HOME', 'LANG', 'LC_ALL', 'PATH', 'TMPDIR']\n"


async def test_unsupported_language_and_bad_interpreter() -> None:
    run = await RUNNER.run("echo hi", "bash")
    assert run.stop_reason == "sandbox_error:unsupported_language"
    run = await SandboxRunner(python="/nonexistent/python3").run("print(1)")
    assert run.stop_reason == "sandbox_error:start_failed"
    assert "/nonexistent/python3" in run.message


def test_limits_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="cpu_seconds must be an integer >= 1, got 0"):
        SandboxLimits(cpu_seconds=0)
    with pytest.raises(ConfigurationError, match="wall_seconds"):
        SandboxLimits(wall_seconds=float("nan"))
    with pytest.raises(ConfigurationError, match="memory_bytes must be >= 32 MiB"):
        SandboxLimits(memory_bytes=1024)


def test_code_run_to_dict() -> None:
    run = CodeRun("python", "success", 0, "1\n", "", 12.34567, isolation=("guard",))
    assert run.to_dict()["duration_ms"] == 12.346
    assert run.to_dict()["isolation"] == ["guard"]
