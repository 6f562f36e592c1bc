"""A run that reaches its task limit ends ``sandbox_processes:limit``, whatever else forks at the same time.

The kernel counts a new task against its uid's ``RLIMIT_NPROC`` early in ``fork()`` and against the control
group's ``pids.max`` only at the end, and the uid's count includes every fork still in progress. With the run's
``RLIMIT_NPROC`` one above the group's limit, forks in progress at a full group were refused by the rlimit,
which the supervisor cannot see: a fork bomb whose first process was refused that way ended ``sandbox_exit:1``
(once in 300 bombs run three at a time on two CPUs; a full-suite run failed on it). Here processes fork at once
at a full group and count their refusals; the supervisor counts the group's (``pids.events``): the two agree.

Needs the OS sandbox and, for the group, root; without a group the verdicts are not observed and these skip.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
from collections.abc import Iterator

import pytest

from routegate.technique.sandbox import SandboxLimits, SandboxRunner
from technique._sandbox_procs import needs_os_sandbox, sandbox_processes, subreaper

LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=5, memory_bytes=256 * 1024 * 1024)
FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
WORKERS = 6
TRIES = 200
CONTENDERS = """
import os
hold_r, hold_w = os.pipe()
start_r, start_w = os.pipe()
result_r, result_w = os.pipe()
for _ in range(WORKERS):
    if os.fork() == 0:
        os.close(start_w)
        os.read(start_r, 1)  # end of file: every worker starts at once
        refused = 0
        for _ in range(TRIES):
            try:
                child = os.fork()
            except OSError:
                refused += 1
                continue
            if child == 0:
                os.close(hold_w)
                os.read(hold_r, 1)  # holds its task until the run ends
                os._exit(0)
        os.write(result_w, b"%d\\n" % refused)
        os._exit(0)
os.close(start_w)
for _ in range(WORKERS):
    os.wait()
os.close(result_w)
print(sum(int(line) for line in os.read(result_r, 4096).split()))
""".replace("WORKERS", str(WORKERS)).replace("TRIES", str(TRIES))


@pytest.fixture(autouse=True, scope="module")
def _reap_orphans_here() -> Iterator[None]:
    """Orphans of a run are re-parented to this process, so ``sandbox_processes()`` sees every leftover."""
    with subreaper():
        yield


@pytest.fixture(scope="module")
def grouped() -> SandboxRunner:
    """A runner whose runs get a control group (the task limit's verdict needs one)."""
    runner = SandboxRunner(limits=LIMITS)
    probe = asyncio.run(runner.run("print(1)"))
    if "cgroup" not in probe.isolation:
        pytest.skip("no per-run control group here (not root): the code sees EAGAIN and no verdict is observed")
    return runner


@needs_os_sandbox
async def test_forks_at_a_full_group_are_all_refused_by_the_group(grouped: SandboxRunner) -> None:
    # max_processes=8: the group holds 10 tasks, the first process and its 6 workers take 7, so the workers'
    # 1200 forks run into the limit together (two CPUs run two of them at once, preemption more)
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=30, cpu_seconds=5, max_processes=8))
    run = await runner.run(CONTENDERS)
    refused_inside = int(run.stdout)
    # 3 free tasks, and one more each time a worker is done (but the last): nearly every fork met the limit
    assert refused_inside >= WORKERS * TRIES - (3 + WORKERS - 1)
    assert run.stop_reason == "sandbox_processes:limit", run
    assert f"({refused_inside} forks or new threads refused)" in run.message  # every refusal was the group's
    assert sandbox_processes() == []


@needs_os_sandbox
async def test_fork_bombs_beside_other_runs_each_end_with_their_own_stop(grouped: SandboxRunner) -> None:
    runs = await asyncio.gather(
        grouped.run(FORK_BOMB),
        grouped.run(FORK_BOMB),
        grouped.run(CONTENDERS),
        grouped.run("print('beside the bombs')"),
        grouped.run("raise SystemExit(3)"),
    )
    assert [run.stop_reason for run in runs] == [
        "sandbox_processes:limit",
        "sandbox_processes:limit",
        "sandbox_processes:limit",
        "success",
        "sandbox_exit:3",
    ]
    assert runs[3].stdout == "beside the bombs\n"
    assert sandbox_processes() == []


LOWERED = """
import asyncio, json, resource, sys
from routegate.errors import ConfigurationError
from routegate.technique.sandbox import SandboxLimits, SandboxRunner

resource.setrlimit(resource.RLIMIT_NPROC, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NPROC)[1]))
runner = SandboxRunner(limits=SandboxLimits(wall_seconds=30))
run = asyncio.run(runner.run("import os\\nwhile True:\\n    os.fork()\\n"))
try:
    runner.check()
    refused = ""
except ConfigurationError as exc:
    refused = str(exc)
print(json.dumps({"stop_reason": run.stop_reason, "message": run.message, "check": refused}))
"""


def _fork_bomb_under_nproc(limit: int) -> dict[str, str]:
    """A fork bomb run by a supervisor whose own ``RLIMIT_NPROC`` soft limit is ``limit`` (bwrap inherits it)."""
    with subreaper():
        done = subprocess.run(
            [sys.executable, "-c", LOWERED, str(limit)], capture_output=True, text=True, timeout=120, check=True
        )
        assert sandbox_processes() == []
    report: dict[str, str] = json.loads(done.stdout)
    return report


@needs_os_sandbox
def test_a_process_limit_too_low_for_a_run_is_refused_before_anything_runs(grouped: SandboxRunner) -> None:
    # the default max_processes=16: 18 tasks in the group, each may be mid-fork, and bubblewrap: 37 of the uid
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard != resource.RLIM_INFINITY and hard < 37:
        pytest.skip(f"this process's hard RLIMIT_NPROC ({hard}) is below what the test needs to set (37)")
    # before, bwrap inherited a limit of 10 for the run's uid: the bomb was refused at 9 tasks, before the
    # group's 18, and ended sandbox_exit:1
    low = _fork_bomb_under_nproc(10)
    assert low["stop_reason"] == "sandbox_error:unavailable", low
    assert "RLIMIT_NPROC is 10, below the 37 tasks a run with max_processes=16 may count" in low["message"]
    assert "raise it (ulimit -u" in low["check"]
    # each reason says what to do itself; the error's own advice fits every reason (not only a missing program)
    assert low["check"].endswith(
        "Fix that, or pass SandboxRunner(mode='guard') to opt into the in-process guard, which is not a security boundary"
    ), low["check"]
    enough = _fork_bomb_under_nproc(37)
    assert (enough["stop_reason"], enough["check"]) == ("sandbox_processes:limit", ""), enough
