"""``cpu_seconds`` holds for the whole run, not per process (issue 23: 15 busy children used 3.7 x the limit).

The run forks busy children. The supervisor runs in a helper process that the test first puts into a control
group of its own, so the kernel's CPU accounting of that group — the helper, bwrap and every process of the
run, hierarchically — is the outside measurement; the helper's own CPU time (its ``RUSAGE_SELF``) is taken off.
Two meters are checked: the per-run control group (``cpuacct``/``cpu.stat`` plus the ``cpu`` bandwidth cap),
and ``/proc`` polling where no group can be made. Afterwards no process of a sandbox uid is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from technique._sandbox_procs import needs_os_sandbox, sandbox_processes, subreaper

CPU_SECONDS = 1
MARGIN = 0.5  # the supervisor reads the CPU time every 50 ms; bwrap's and the interpreter's start-up count too
BUSY_CHILDREN = 8
HELPER = """
import asyncio, json, resource, sys
from routegate.sandbox import supervisor as sandbox
from routegate.technique.sandbox import SandboxLimits, SandboxRunner

if sys.argv[1] == "proc":  # no control group: the supervisor counts the run's CPU time from /proc
    sandbox.RunGroup.create = staticmethod(lambda *args, **kwargs: None)
code = "import os\\nfor _ in range(CHILDREN):\\n    if os.fork() == 0:\\n        break\\nwhile True:\\n    pass\\n"
limits = SandboxLimits(wall_seconds=60, cpu_seconds=CPU_SECONDS, max_processes=32)
run = asyncio.run(SandboxRunner(limits=limits).run(code))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"stop_reason": run.stop_reason, "message": run.message, "isolation": list(run.isolation),
                  "own_cpu": usage.ru_utime + usage.ru_stime}))
""".replace("CHILDREN", str(BUSY_CHILDREN)).replace("CPU_SECONDS", str(CPU_SECONDS))


def _own_group(controller: str) -> Path | None:
    """This process's group directory for ``controller`` (v1), or its v2 group ("" controller)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            base = Path("/sys/fs/cgroup") / (controller if controller else "")
            return base / path.lstrip("/")
    return None


@pytest.fixture
def accounting_group() -> Iterator[tuple[Path, str] | None]:
    """A fresh control group to run the helper in, with its CPU counter file; None when we cannot make one."""
    name = f"routegate-test-cpu-{secrets.token_hex(4)}"
    candidates = []
    if os.geteuid() == 0:
        v1 = _own_group("cpuacct")
        if v1 is not None and Path("/sys/fs/cgroup/cpuacct").is_dir():
            candidates.append((v1 / name, "cpuacct.usage"))
        v2 = _own_group("")
        if Path("/sys/fs/cgroup/cgroup.controllers").exists() and v2 is not None:
            candidates.append((v2 / name, "cpu.stat"))
    for directory, counter in candidates:
        try:
            directory.mkdir()
        except OSError:
            continue
        try:
            yield directory, counter
        finally:
            for _ in range(100):
                with contextlib.suppress(OSError):
                    directory.rmdir()
                    break
        return
    yield None


def _used(directory: Path, counter: str) -> float:
    text = (directory / counter).read_text()
    if counter == "cpuacct.usage":
        return int(text) / 1e9
    fields = dict(line.split() for line in text.splitlines())
    return int(fields["usage_usec"]) / 1e6


@needs_os_sandbox
@pytest.mark.parametrize("meter", ["cgroup", "proc"])
def test_busy_children_share_one_cpu_budget(meter: str, accounting_group: tuple[Path, str] | None) -> None:

    argv = [sys.executable, "-c", HELPER, meter]
    if accounting_group is not None:  # the shell joins the group, then becomes the helper: all of it is counted
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(accounting_group[0] / "cgroup.procs"), *argv]
    with subreaper():  # orphans of the run would come to this process: sandbox_processes() sees every leftover
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        left = sandbox_processes()
    report = json.loads(done.stdout)
    assert report["stop_reason"] == "sandbox_timeout:cpu", report
    assert f"cpu_seconds={CPU_SECONDS} used up" in report["message"]
    assert ("cgroup" in report["isolation"]) == (meter == "cgroup" and os.geteuid() == 0)
    if accounting_group is not None:
        run_cpu = _used(*accounting_group) - report["own_cpu"]  # bwrap and every process of the run
        assert run_cpu <= CPU_SECONDS + MARGIN, f"the run used {run_cpu:.2f} s of CPU for cpu_seconds={CPU_SECONDS}"
        assert run_cpu >= CPU_SECONDS * 0.9  # the measurement does see the run
    reported = report["message"].partition("(")[2].partition(" s by all its processes")[0]
    assert CPU_SECONDS <= float(reported or "nan") <= CPU_SECONDS + MARGIN, report["message"]
    assert left == [], f"processes of the run left in the host's table: {left}"
