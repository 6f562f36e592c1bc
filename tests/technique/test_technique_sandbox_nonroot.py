"""A server that is not root still holds a run to ``max_processes``.

Not root, a run has no per-run uid and no control group: ``RLIMIT_NPROC`` is its only task limit, and the run has
the server's uid. The bootstrap used to set it to "every thread of the uid + ``max_processes``", but since Linux
5.14 the kernel checks it against the tasks of the run's own user namespace only, so a run could start as many
processes as the server had threads, plus ``max_processes`` (116 forks with ``max_processes=16`` beside a process
of 100 threads). Here a process of an unprivileged uid holds many threads, as a busy server does, and runs code
through the public API that forks until refused; it must be refused at the limit a control group would set.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import routegate
from routegate.errors import ConfigurationError
from routegate.sandbox import supervisor
from routegate.technique.sandbox import SandboxLimits, SandboxRunner
from technique._sandbox_procs import needs_os_sandbox

NOBODY = 65534
MAX_PROCESSES = 4
HELD_THREADS = 64
FAN_OUT = """
import os
r, w = os.pipe()
forks = refused = 0
for _ in range(500):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # holds its task until the run ends
        os._exit(0)
    forks += 1
print(forks, refused)
"""
FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
RUNNER = """
import asyncio, json, sys, threading
from routegate.technique.sandbox import SandboxLimits, SandboxRunner

release = threading.Event()
held = [threading.Thread(target=release.wait, daemon=True) for _ in range(HELD_THREADS)]
for thread in held:
    thread.start()
runner = SandboxRunner(limits=SandboxLimits(max_processes=MAX_PROCESSES, wall_seconds=30))
runs = [asyncio.run(runner.run(code)).to_dict() for code in json.loads(sys.argv[1])]
release.set()
print(json.dumps({"missing": runner.missing(), "runs": runs}))
""".replace("HELD_THREADS", str(HELD_THREADS)).replace("MAX_PROCESSES", str(MAX_PROCESSES))


def _readable_by_others(path: Path) -> bool:
    return all(
        part.stat().st_mode & stat.S_IROTH and part.stat().st_mode & stat.S_IXOTH for part in [path, *path.parents]
    )


def _as_unprivileged(*codes: str) -> dict[str, Any]:
    """Run ``codes`` in the sandbox from a process of an unprivileged uid that holds ``HELD_THREADS`` threads."""
    source = Path(routegate.__file__).resolve().parents[1]
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("setpriv (util-linux) is not installed: cannot drop to an unprivileged uid")
        if not (_readable_by_others(source / "routegate") and _readable_by_others(Path(sys.executable).parent)):
            pytest.skip(f"{source} or {sys.executable} is not readable by uid {NOBODY}")
        prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    done = subprocess.run(
        [*prefix, sys.executable, "-c", RUNNER, json.dumps(codes)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(source)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    missing = result["missing"]
    if missing is not None and "RLIMIT_NPROC" not in missing:
        pytest.skip(f"no OS sandbox for an unprivileged uid here: {missing}")
    return result


@needs_os_sandbox
def test_an_unprivileged_run_is_held_to_max_processes() -> None:
    result = _as_unprivileged(FAN_OUT, FORK_BOMB)
    fan_out, bomb = result["runs"]
    if result["missing"] is not None:
        # a kernel that counts RLIMIT_NPROC over the whole uid: refused, naming what to do, never run weaker
        assert fan_out["stop_reason"] == bomb["stop_reason"] == "sandbox_error:unavailable"
        assert "run the server as root" in fan_out["message"]
        return
    assert "cgroup" not in fan_out["isolation"] and "uid" not in fan_out["isolation"]
    # the run's tasks are its first process and what it forked: max_processes + 2, as a control group would hold
    assert fan_out["stop_reason"] == "success", fan_out
    assert fan_out["stdout"].split() == [str(MAX_PROCESSES + 1), "1"], fan_out
    # the fork bomb's first process is refused too, and its exit ends the run (the documented stop without a group)
    assert bomb["stop_reason"] == "sandbox_exit:1", bomb


@needs_os_sandbox
async def test_a_kernel_that_counts_the_whole_uid_is_refused_not_run_weaker(monkeypatch: pytest.MonkeyPatch) -> None:
    # before Linux 5.14 the kernel counted RLIMIT_NPROC over every task of the uid: no value holds a run that
    # shares the server's uid to max_processes, so such a kernel is refused with what to do
    monkeypatch.setattr(supervisor, "nproc_counting", lambda bwrap: "uid")
    monkeypatch.setattr(supervisor.os, "geteuid", lambda: NOBODY)
    runner = SandboxRunner(limits=SandboxLimits(max_processes=MAX_PROCESSES))
    result = await runner.run(FORK_BOMB)
    assert result.stop_reason == "sandbox_error:unavailable"
    assert "counts RLIMIT_NPROC over every process of the uid" in result.message
    assert "run the server as root" in result.message
    with pytest.raises(ConfigurationError, match=r"Linux 5\.14 or later"):
        runner.check()
