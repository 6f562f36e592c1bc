"""The sandboxed runner: each failure mode ends with a clear stop reason, quickly (short limits).

Needs the OS mechanism (bubblewrap + user namespaces, see ``dev.py``): without it every test here skips with
the reason the runner gives. The hostile corpus is in ``test_technique_sandbox_hostile.py``."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.errors import ConfigurationError
from routegate.sandbox import supervisor as sandbox_module
from routegate.technique.sandbox import CodeRun, SandboxLimits, SandboxRunner
from technique._sandbox_procs import sandbox_processes, subreaper

QUICK = SandboxLimits(wall_seconds=15, cpu_seconds=1, memory_bytes=256 * 1024 * 1024, max_file_bytes=1024 * 1024)
RUNNER = SandboxRunner(limits=QUICK)
MISSING = RUNNER.missing()
needs_os_sandbox = pytest.mark.skipif(
    MISSING is not None, reason=f"OS sandbox unavailable on this host: {MISSING} (dev.py installs bubblewrap as root)"
)


@pytest.fixture(autouse=True, scope="module")
def _reap_orphans_here() -> Iterator[None]:
    """Orphans of a run are re-parented to this process, so ``sandbox_processes()`` sees every leftover."""
    with subreaper():
        yield


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


@pytest.fixture
def own_temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The supervisor's temporary directories go to a directory of this test's own, not the shared ``/tmp``,
    where other test runs on the machine make and remove theirs at the same time (a before/after listing of
    ``/tmp`` failed whenever another run's came or went in between)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _sandbox_dirs() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith("routegate-sandbox-")}


@needs_os_sandbox
@pytest.mark.usefixtures("own_temp_root")
async def test_prints_and_exits_cleanly() -> None:
    before = _sandbox_dirs()
    run = await RUNNER.run("import sys\nprint('hello', sys.flags.isolated)\nprint('to stderr', file=sys.stderr)")
    assert (run.stop_reason, run.exit_code, run.stdout, run.stderr) == ("success", 0, "hello 1\n", "to stderr\n")
    assert run.ok
    assert {"namespaces", "seccomp", "readonly-root", "tmpfs", "rlimits"} <= set(run.isolation)
    assert "guard" not in run.isolation
    assert _sandbox_dirs() == before  # the output directory is removed


@needs_os_sandbox
async def test_an_exception_is_a_nonzero_exit_with_a_clean_traceback() -> None:
    run = await RUNNER.run("def f():\n    return 1 / 0\n\nf()\n")
    assert run.stop_reason == "sandbox_exit:1"
    assert run.stderr.startswith('Traceback (most recent call last):\n  File "main.py", line 4')
    assert run.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "<string>" not in run.stderr


@needs_os_sandbox
async def test_sys_exit_status_is_kept() -> None:
    run = await RUNNER.run("raise SystemExit(3)")
    assert (run.stop_reason, run.exit_code) == ("sandbox_exit:3", 3)


@needs_os_sandbox
async def test_infinite_loop_hits_the_cpu_limit() -> None:
    run = await RUNNER.run("while True:\n    pass\n")
    assert run.stop_reason == "sandbox_timeout:cpu"
    assert "cpu_seconds=1" in run.message


@needs_os_sandbox
async def test_sleeping_forever_hits_the_wall_clock_limit() -> None:
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=0.5, cpu_seconds=1))
    run = await runner.run("import time\nwhile True:\n    time.sleep(1)\n")
    assert run.stop_reason == "sandbox_timeout:wall"
    assert run.exit_code == 137  # the supervisor SIGKILLed the code; bwrap reports a death by signal n as 128+n


@needs_os_sandbox
async def test_fork_bomb_is_stopped() -> None:
    run = await RUNNER.run("import os\nwhile True:\n    os.fork()\n")
    if "cgroup" in run.isolation:
        assert run.stop_reason == "sandbox_processes:limit"  # pids.events, read by the supervisor
    else:
        assert run.stop_reason == "sandbox_exit:1"  # only the code saw EAGAIN
    assert sandbox_processes() == []  # every process of the run's uid is gone


@needs_os_sandbox
@pytest.mark.usefixtures("own_temp_root")
async def test_a_cancelled_run_leaves_nothing_behind() -> None:
    before = _sandbox_dirs()
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(20)\n"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(RUNNER.run(code), 1.0)
    assert sandbox_processes() == []
    assert _sandbox_dirs() == before


@needs_os_sandbox
async def test_touching_more_memory_than_the_limit_is_a_memory_stop() -> None:
    run = await RUNNER.run("block = b'x' * (600 * 1024 * 1024)\nprint('allocated')\n")
    assert run.stdout == ""
    if "cgroup" not in run.isolation:
        pytest.skip("no per-run control group here (not root): RLIMIT_AS gives the code a MemoryError instead")
    assert run.stop_reason == "sandbox_memory:limit"  # the group's OOM counter, not the code's stderr
    assert "memory limit" in run.message


@needs_os_sandbox
async def test_a_huge_reservation_fails_inside_without_a_verdict() -> None:
    run = await RUNNER.run("block = bytearray(64 * 1024 ** 3)\n")
    assert run.stop_reason == "sandbox_exit:1"
    assert run.stderr.rstrip().endswith("MemoryError")


@needs_os_sandbox
async def test_the_host_listener_is_unreachable(listener: int) -> None:
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {listener}), timeout=2)\n"
    run = await RUNNER.run(code)
    assert run.stop_reason == "sandbox_exit:1"  # what the OS observably does: the connection fails
    assert "ConnectionRefusedError" in run.stderr  # the sandbox's own loopback has no listener


@needs_os_sandbox
async def test_name_resolution_fails() -> None:
    run = await RUNNER.run("import socket\nsocket.getaddrinfo('example.com', 443)\n")
    assert run.stop_reason == "sandbox_exit:1"
    assert "gaierror" in run.stderr


@needs_os_sandbox
async def test_writing_outside_the_working_directory_has_no_effect(tmp_path: Path) -> None:
    target = tmp_path / "escape.txt"
    run = await RUNNER.run(f"open({str(target)!r}, 'w').write('x')\n")
    assert run.stop_reason == "sandbox_exit:1"  # that directory does not exist in the sandbox
    assert not _exists(target)
    shared_tmp = Path("/tmp", f"routegate-escape-{os.getpid()}")
    run = await RUNNER.run(f"import os\nos.mkdir({str(shared_tmp)!r})\nprint(os.listdir('/tmp'))\n")
    assert run.stdout == f"[{shared_tmp.name!r}]\n"  # the sandbox's own, private /tmp
    assert not _exists(shared_tmp)


@needs_os_sandbox
async def test_files_inside_the_working_directory_are_fine() -> None:
    run = await RUNNER.run(
        "import os\nopen('notes.txt', 'w').write('kept')\nprint(open('notes.txt').read(), sorted(os.listdir('.')))"
    )
    assert run.stop_reason == "success"
    assert run.stdout == "kept ['main.py', 'notes.txt']\n"


@needs_os_sandbox
async def test_running_other_programs_fails() -> None:
    run = await RUNNER.run("import subprocess\nsubprocess.run(['id'])\n")
    assert (run.stop_reason, run.stderr.rstrip().rsplit("\n", 1)[-1]) == (
        "sandbox_exit:1",
        "PermissionError: [Errno 1] Operation not permitted: 'id'",  # seccomp refuses every execve
    )
    run = await RUNNER.run("import sys, subprocess\nsubprocess.run([sys.executable, '-c', 'print(1)'])\n")
    assert "PermissionError: [Errno 1] Operation not permitted" in run.stderr  # seccomp, on the interpreter too


@needs_os_sandbox
async def test_output_flood_hits_the_file_size_limit() -> None:
    run = await RUNNER.run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert run.stop_reason == "sandbox_filesize:limit"
    assert run.truncated
    assert len(run.stdout) == QUICK.max_output_chars


@needs_os_sandbox
async def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_TEST_SECRET", "hunter2")
    run = await RUNNER.run("import os\nprint(sorted(os.environ))\n")
    assert run.stdout == "['HOME', 'LANG', 'LC_ALL', 'PATH', 'PWD', 'TMPDIR']\n"


async def test_a_missing_mechanism_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    lacking = "bubblewrap ('bwrap') is not installed: apt-get install bubblewrap (Debian/Ubuntu)"
    monkeypatch.setattr(sandbox_module, "missing_mechanism", lambda: lacking)
    run = await RUNNER.run("print('never runs')")
    assert (run.stop_reason, run.exit_code, run.stdout) == ("sandbox_error:unavailable", None, "")
    assert lacking in run.message
    with pytest.raises(ConfigurationError, match=r"bwrap.*mode='guard'.*not a security boundary"):
        RUNNER.check()


async def test_the_in_process_guard_is_an_explicit_opt_in_and_says_it_is_no_boundary(tmp_path: Path) -> None:
    runner = SandboxRunner(limits=QUICK, mode="guard")
    assert runner.missing() is None
    run = await runner.run(f"open({str(tmp_path / 'x')!r}, 'w')\n")
    assert "not-a-boundary" in run.isolation
    assert run.stop_reason == "sandbox_exit:1"
    assert "sandbox: writing" in run.stderr  # the hook's clear message ...
    assert not (tmp_path / "x").exists()
    spoof = await runner.run("import sys\nprint('routegate-sandbox:violation:memory', file=sys.stderr)\n")
    assert spoof.stop_reason == "success"  # ... but nothing it prints decides the verdict
    with pytest.raises(ConfigurationError, match="mode must be 'os' or 'guard'"):
        SandboxRunner(mode="none")  # type: ignore[arg-type]  # misuse on purpose


@needs_os_sandbox
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
    with pytest.raises(ConfigurationError, match="tmpfs_bytes must be an integer >= 1, got -1"):
        SandboxLimits(tmpfs_bytes=-1)


def test_code_run_to_dict() -> None:
    run = CodeRun("python", "success", 0, "1\n", "", 12.34567, isolation=("guard",))
    assert run.to_dict()["duration_ms"] == 12.346
    assert run.to_dict()["isolation"] == ["guard"]


@needs_os_sandbox
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.text(min_size=1, max_size=300) | st.sampled_from(["\x00", "\ud800", "print('\udcff')", "é" * 50]))
@pytest.mark.usefixtures("own_temp_root")
async def test_any_text_as_code_ends_with_a_stop_reason_and_leaves_nothing(code: str) -> None:
    before = _sandbox_dirs()
    run = await RUNNER.run(code)
    assert run.stop_reason == "success" or run.stop_reason.startswith(("sandbox_exit:", "sandbox_timeout:"))
    assert sandbox_processes() == []
    assert _sandbox_dirs() == before


@needs_os_sandbox
async def test_code_never_runs_when_the_filter_cannot_be_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "_seccomp_hex", lambda: "")  # an empty program: the kernel refuses it
    run = await RUNNER.run("print('ran without the filter')")
    assert (run.stop_reason, run.stdout) == ("sandbox_error:setup_failed", "")
    assert "prctl(PR_SET_SECCOMP) failed" in run.message
