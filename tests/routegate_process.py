"""``routegate ...`` as a process of its own, the way an operator starts it from a terminal: its own process group
(a terminal's Ctrl-C addresses the group), its output read line by line until it says it is ready."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

READY = "Ctrl-C stops everything"
_CLI = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]


def start_routegate(
    args: Sequence[str], env: Mapping[str, str], *, within: float
) -> tuple[subprocess.Popen[str], list[str]]:
    """The running command and the lines it printed up to :data:`READY`; an :class:`AssertionError` with its
    output when it exits first or is not ready ``within`` seconds (its process group is then killed)."""
    proc = subprocess.Popen(
        [*_CLI, *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + within
    name = f"routegate {' '.join(args[:2])}"
    try:
        while not any(READY in line for line in lines):  # readiness, bounded
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError(f"{name} exited early:\n" + "".join(lines))
            lines.append(line)
            assert time.monotonic() < deadline, f"{name} did not get ready in {within:g} s:\n" + "".join(lines)
    except AssertionError:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        raise
    return proc, lines
