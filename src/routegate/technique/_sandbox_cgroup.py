"""A per-run control group: the supervisor's own view of a run's memory, processes and CPU, and its kill switch.

The supervisor (root) creates one group per run below its own, sets ``memory`` and ``pids`` limits, moves the
sandbox's first process into it before that process starts anything, and afterwards reads counters the
sandboxed code cannot write (``/sys/fs/cgroup`` is not mounted inside the sandbox): ``memory.oom_control``'s
``oom_kill`` (or ``memory.events``'s ``oom_kill`` on cgroup v2), ``pids.events``'s ``max`` and the CPU time.
At the end it kills every task still listed in the group and removes it.

Both layouts are handled: cgroup v1 with the ``memory``, ``pids`` and ``cpuacct`` controllers mounted at
``/sys/fs/cgroup/<controller>``, and a cgroup v2 tree whose group delegates ``memory`` and ``pids``. When no
group can be made (not root, no controllers) the caller runs without one and says so in ``CodeRun.isolation``.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own_paths() -> dict[str, str]:
    """This process's group per v1 controller (``""`` is the v2 group), from ``/proc/self/cgroup``."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


@dataclass(frozen=True, slots=True)
class RunGroup:
    """The directories of one run's group: per controller (v1) or one directory for all (v2)."""

    memory: Path
    pids: Path
    cpu: Path | None
    unified: bool

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_tasks: int) -> RunGroup | None:
        """A new group ``name`` with the limits set, or None when this host does not let us make one."""
        if os.geteuid() != 0:
            return None
        own = _own_paths()
        v1 = {c: ROOT / c / own.get(c, "/").lstrip("/") / name for c in ("memory", "pids", "cpuacct")}
        if (ROOT / "memory" / "memory.limit_in_bytes").exists() and (ROOT / "pids").is_dir():
            group = cls(v1["memory"], v1["pids"], v1["cpuacct"] if (ROOT / "cpuacct").is_dir() else None, False)
        elif (ROOT / "cgroup.controllers").exists():
            parent = ROOT / own.get("", "/").lstrip("/")
            enabled = _read(parent / "cgroup.subtree_control").split()
            if not {"memory", "pids"} <= set(enabled):
                return None
            group = cls(parent / name, parent / name, parent / name, True)
        else:
            return None
        try:
            group._make(memory_bytes, max_tasks)
        except OSError:
            group.remove()
            return None
        return group

    def _dirs(self) -> list[Path]:
        return list(dict.fromkeys(d for d in (self.memory, self.pids, self.cpu) if d is not None))

    def _make(self, memory_bytes: int, max_tasks: int) -> None:
        for directory in self._dirs():
            directory.mkdir()
        if self.unified:
            (self.memory / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (self.memory / "memory.swap.max").write_text("0")
        else:
            (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (self.pids / "pids.max").write_text(str(max_tasks))

    def attach(self, pid: int) -> None:
        """Move ``pid`` into the group (in every controller); its later children are born inside."""
        for directory in self._dirs():
            (directory / "cgroup.procs").write_text(str(pid))

    def memory_exceeded(self) -> bool:
        """The kernel's OOM killer acted inside the group (it only does at the group's limit)."""
        if self.unified:
            return _field(_read(self.memory / "memory.events"), "oom_kill") > 0
        control = _read(self.memory / "memory.oom_control")
        if "oom_kill " in control:
            return _field(control, "oom_kill") > 0
        failcnt = _read(self.memory / "memory.failcnt").strip()
        return failcnt.isdigit() and int(failcnt) > 0

    def processes_exceeded(self) -> bool:
        """A fork or thread creation was refused at ``pids.max``."""
        return _field(_read(self.pids / "pids.events"), "max") > 0

    def cpu_seconds(self) -> float | None:
        """CPU time used by every task of the group, dead ones included."""
        if self.cpu is None:
            return None
        if self.unified:
            return _field(_read(self.cpu / "cpu.stat"), "usage_usec") / 1e6
        text = _read(self.cpu / "cpuacct.usage").strip()
        return int(text) / 1e9 if text.isdigit() else None

    def tasks(self) -> list[int]:
        return [int(pid) for pid in _read(self.pids / "cgroup.procs").split() if pid.isdigit()]

    def kill_all(self) -> None:
        """SIGKILL every task left in the group until it is empty (bounded number of sweeps)."""
        for _ in range(1000):
            pids = self.tasks()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            os.sched_yield()

    def remove(self) -> None:
        for directory in self._dirs():
            with contextlib.suppress(OSError):
                directory.rmdir()
