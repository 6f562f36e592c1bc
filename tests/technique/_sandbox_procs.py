"""Host-side helpers of the sandbox tests: the skip marker when the OS has no sandbox, and which processes of a
sandbox uid are still alive."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from routegate.technique.sandbox import SandboxRunner

OS_SANDBOX_MISSING = SandboxRunner().missing()
needs_os_sandbox = pytest.mark.skipif(
    OS_SANDBOX_MISSING is not None,
    reason=f"OS sandbox unavailable on this host: {OS_SANDBOX_MISSING} (dev.py installs bubblewrap as root)",
)
"""Skip (loudly, with what is missing) a test that runs real code when the OS cannot give the sandbox."""


def process_table() -> dict[int, tuple[int, int, str]]:
    """Every process of the host's /proc: pid -> (parent pid, real uid, state as /proc shows it)."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        table[int(entry)] = (int(fields["PPid"]), int(fields["Uid"].split()[0]), fields["State"].strip())
    return table


def sandbox_processes() -> list[int]:
    """Live processes of a sandbox uid (1,000,000-1,999,999) descending from this test process.

    Read from the host's /proc. Under :func:`subreaper` a run's orphans are re-parented to this process rather
    than to init, so descent is exact, and other suites' concurrent runs on a shared machine are not counted.
    """
    table = process_table()
    me = os.getpid()

    def descends(pid: int) -> bool:
        for _ in range(64):
            parent = table.get(pid, (0, 0, ""))[0]
            if parent in (0, 1):
                return False
            if parent == me:
                return True
            pid = parent
        return False

    return [
        pid
        for pid, (_, uid, state) in table.items()
        if 1_000_000 <= uid < 2_000_000 and not state.startswith("Z") and descends(pid)
    ]


@contextmanager
def subreaper() -> Iterator[None]:
    """Make this process the child subreaper of everything it starts, for the duration."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    try:
        yield
    finally:
        libc.prctl(36, 0, 0, 0, 0)
