"""A per-run control group: the supervisor's own view of a run's memory, processes and CPU, and its kill switch.

The supervisor (root) creates one group per run below its own, sets ``memory``, ``pids`` and CPU bandwidth
limits, moves the sandbox's first process into it before that process starts anything, and afterwards reads
counters the sandboxed code cannot write (``/sys/fs/cgroup`` is not mounted inside the sandbox):
``memory.oom_control``'s ``oom_kill`` (or ``memory.events``'s ``oom_kill`` on cgroup v2), ``pids.events``'s
``max`` and the CPU time of every process of the run, dead ones included. While the run goes on, the
supervisor reads that CPU time to stop the run when the run as a whole has used its ``cpu_seconds``
(``RLIMIT_CPU`` only counts one process). At the end it kills every task still listed in the group and removes
it.

Both layouts are handled: cgroup v1 with the ``memory``, ``pids``, ``cpuacct`` and (optionally) ``cpu``
controllers mounted at ``/sys/fs/cgroup/<controller>`` (``cpu,cpuacct`` combined or apart), and a cgroup v2
tree whose group delegates ``memory`` and ``pids`` (and optionally ``cpu``; the CPU time in ``cpu.stat`` is
there without it). The CPU bandwidth limit (``cpu.cfs_quota_us`` on v1, ``cpu.max`` on v2) caps the run at
``cpu_cores`` CPUs, so between two of the supervisor's readings it can use little more. When no group can be made
(not root, no controllers) the caller runs without one, says so in ``CodeRun.isolation`` and counts the CPU
time from ``/proc`` instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000


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
    """The directories of one run's group: per controller (v1) or one directory for all (v2).

    ``cpu`` is where the CPU time is read (v1 ``cpuacct``, v2 the group), ``bandwidth`` where the CPU limit is
    written (v1 ``cpu``, v2 the group when its parent delegates ``cpu``); either may be missing.
    """

    memory: Path
    pids: Path
    cpu: Path | None
    unified: bool
    bandwidth: Path | None = None

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_tasks: int, cpu_cores: float | None = None) -> RunGroup | None:
        """A new group ``name`` with the limits set, or None when this host does not let us make one."""
        if os.geteuid() != 0:
            return None
        own = _own_paths()
        v1 = {c: ROOT / c / own.get(c, "/").lstrip("/") / name for c in ("memory", "pids", "cpuacct", "cpu")}
        if (ROOT / "memory" / "memory.limit_in_bytes").exists() and (ROOT / "pids").is_dir():
            cpuacct = v1["cpuacct"] if (ROOT / "cpuacct").is_dir() else None
            bandwidth = v1["cpu"] if cpu_cores and (ROOT / "cpu" / "cpu.cfs_quota_us").exists() else None
            group = cls(v1["memory"], v1["pids"], cpuacct, False, bandwidth)
        elif (ROOT / "cgroup.controllers").exists():
            parent = ROOT / own.get("", "/").lstrip("/")
            enabled = _read(parent / "cgroup.subtree_control").split()
            if not {"memory", "pids"} <= set(enabled):
                return None
            bandwidth = parent / name if cpu_cores and "cpu" in enabled else None
            group = cls(parent / name, parent / name, parent / name, True, bandwidth)
        else:
            return None
        try:
            group._make(memory_bytes, max_tasks, cpu_cores)
        except OSError:
            group.remove()
            return None
        return group

    def _dirs(self) -> list[Path]:
        """Each directory once, also where two controllers share a hierarchy (v1 ``cpu,cpuacct``)."""
        unique: dict[str, Path] = {}
        for directory in (self.memory, self.pids, self.cpu, self.bandwidth):
            if directory is not None:
                unique.setdefault(os.path.realpath(directory.parent) + "/" + directory.name, directory)
        return list(unique.values())

    def _make(self, memory_bytes: int, max_tasks: int, cpu_cores: float | None) -> None:
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
        if self.bandwidth is not None and cpu_cores:
            quota = max(1000, round(CFS_PERIOD_US * cpu_cores))
            if self.unified:
                (self.bandwidth / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
            else:
                (self.bandwidth / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (self.bandwidth / "cpu.cfs_quota_us").write_text(str(quota))

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
        return self.refused_tasks() > 0

    def refused_tasks(self) -> int:
        """How many forks and thread creations the group refused at ``pids.max`` (``pids.events``'s ``max``)."""
        return _field(_read(self.pids / "pids.events"), "max")

    def cpu_seconds(self) -> float | None:
        """CPU time used by every task of the group, dead ones included (None: not counted here)."""
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
