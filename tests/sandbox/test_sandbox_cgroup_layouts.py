"""The per-run group on each cgroup layout, against a directory tree laid out as the kernel's.

The real kernel is exercised by the sandbox tests on whatever layout the host has (this machine: cgroup v1
with ``cpu`` and ``cpuacct`` mounted apart). Here the other layouts are built as plain directories: cgroup v2
with and without ``cpu`` delegated, and v1 with ``cpu,cpuacct`` combined behind the usual symlinks. The test
checks what the supervisor writes (limits) and what it reads back (CPU time), from the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from routegate.sandbox import _cgroup
from routegate.sandbox._cgroup import RunGroup

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a group is only made as root")
MEMORY, TASKS = 256 * 1024 * 1024, 18


def _layout(monkeypatch: pytest.MonkeyPatch, root: Path, own: dict[str, str]) -> None:
    monkeypatch.setattr(_cgroup, "ROOT", root)
    monkeypatch.setattr(_cgroup, "_own_paths", lambda: own)


def test_v2_with_cpu_delegated_caps_and_counts_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "server.slice"
    parent.mkdir()
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
    _layout(monkeypatch, tmp_path, {"": "/server.slice"})
    group = RunGroup.create("run-1", MEMORY, TASKS, cpu_cores=1.0)
    assert group is not None and group.unified
    run = parent / "run-1"
    assert (run / "memory.max").read_text() == str(MEMORY)
    assert (run / "pids.max").read_text() == str(TASKS)
    assert (run / "cpu.max").read_text() == "100000 100000"  # one CPU's worth of time per 100 ms period
    (run / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert group.cpu_seconds() == 1.5
    for name in ("memory.max", "pids.max", "cpu.max", "cpu.stat", "memory.swap.max"):
        (run / name).unlink(missing_ok=True)
    group.remove()
    assert not run.exists()


def test_v2_without_cpu_still_counts_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    _layout(monkeypatch, tmp_path, {"": "/"})
    group = RunGroup.create("run-2", MEMORY, TASKS, cpu_cores=1.0)
    assert group is not None and group.bandwidth is None
    assert not (tmp_path / "run-2" / "cpu.max").exists()
    (tmp_path / "run-2" / "cpu.stat").write_text("usage_usec 250000\n")  # core accounting, always there on v2
    assert group.cpu_seconds() == 0.25


def test_v1_with_cpu_and_cpuacct_combined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for controller in ("memory", "pids", "cpu,cpuacct"):
        (tmp_path / controller).mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("max")
    (tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1")
    (tmp_path / "cpu").symlink_to("cpu,cpuacct")
    (tmp_path / "cpuacct").symlink_to("cpu,cpuacct")
    _layout(monkeypatch, tmp_path, {"memory": "/", "pids": "/", "cpu": "/", "cpuacct": "/"})
    group = RunGroup.create("run-3", MEMORY, TASKS, cpu_cores=0.5)
    assert group is not None and not group.unified  # one directory for cpu and cpuacct: made once
    run = tmp_path / "cpu,cpuacct" / "run-3"
    assert (run / "cpu.cfs_period_us").read_text() == "100000"
    assert (run / "cpu.cfs_quota_us").read_text() == "50000"
    (run / "cpuacct.usage").write_text("2000000000\n")
    assert group.cpu_seconds() == 2.0
    assert (tmp_path / "memory" / "run-3" / "memory.limit_in_bytes").read_text() == str(MEMORY)


def test_no_cgroup_file_system_means_no_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _layout(monkeypatch, tmp_path, {})
    assert RunGroup.create("run-4", MEMORY, TASKS, cpu_cores=1.0) is None
