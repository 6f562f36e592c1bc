"""Nothing of a run stays in the host's process table, zombies included, even where PID 1 does not reap orphans.

The check runs the sandbox in a fresh interpreter that is *not* a child subreaper (as a server is not), then reads
the host's /proc: an orphan the sandbox left would be re-parented to PID 1 and, on a host whose PID 1 does not
reap (a container's or a VM's minimal init), stay there as a zombie of a sandbox uid. Only the uids of the helper's
own runs are looked at: other test runs on the machine start and end sandboxes of their own meanwhile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from technique._sandbox_procs import needs_os_sandbox, process_table

RUNS = """
import asyncio, json
from routegate.technique.sandbox import SandboxLimits, SandboxRunner

uids = []  # the per-run uid of each run (as root), recorded as the runner picks it
pick = SandboxRunner._identity
def recorded(runner):
    identity = pick(runner)
    uids.extend(identity[:1] if identity else ())
    return identity
SandboxRunner._identity = recorded

async def main():
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=1.5, cpu_seconds=5))
    stops = []
    for code in (
        "print(1)",  # a clean run
        "import os\\nif os.fork() == 0:\\n    os.setsid()\\n    import time; time.sleep(30)",  # a daemon
        "import threading, time\\nfor _ in range(8): threading.Thread(target=time.sleep, args=(30,)).start()",
        "while True: pass",  # killed by the supervisor's wall clock
    ):
        run = await runner.run(code)
        stops.append(run.stop_reason)
    print(json.dumps({"stops": stops, "uids": uids}))

asyncio.run(main())
"""


def _sandbox_uid_entries() -> set[tuple[int, int, str]]:
    """(pid, uid, state) of every process of a sandbox uid (1,000,000-1,999,999) in the host's process table."""
    return {(pid, uid, state) for pid, (_, uid, state) in process_table().items() if 1_000_000 <= uid < 2_000_000}


@needs_os_sandbox
def test_runs_leave_no_process_and_no_zombie_in_the_host_table() -> None:
    before = _sandbox_uid_entries()
    done = subprocess.run([sys.executable, "-c", RUNS], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(done.stdout)
    assert report["stops"] == ["success", "success", "sandbox_timeout:wall", "sandbox_timeout:wall"]
    assert len(report["uids"]) == (4 if os.geteuid() == 0 else 0)  # as root, each run had a uid of its own
    ours = set(report["uids"])
    left = {entry for entry in _sandbox_uid_entries() - before if entry[1] in ours}
    assert left == set(), f"processes of the runs left in the host's table: {left}"
