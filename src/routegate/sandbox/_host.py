"""Host-side helpers of the sandbox supervisor: interpreter choice, process table, pipes, bounded reads.

Everything here runs in the supervisor, outside the sandbox; nothing reads what the sandboxed code printed
to decide anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import stat
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

ContentT = TypeVar("ContentT")

SETPRIV_CANDIDATES = ("/usr/bin/setpriv", "/bin/setpriv")


@dataclass(frozen=True, slots=True)
class Pipes:
    """The supervisor's pipes to the sandbox: info (bwrap reports the child's pid), block (the supervisor's start
    signal, read by the bootstrap once the process is in its control group), ready (set-up done)."""

    info_r: int
    info_w: int
    block_r: int
    block_w: int
    ready_r: int
    ready_w: int
    owned: set[int]

    def close_child_ends(self) -> None:
        """Close our copies of the ends bwrap holds, so a failed bwrap shows as end-of-file."""
        for fd in (self.info_w, self.block_r, self.ready_w):
            self.owned.discard(fd)
            os.close(fd)


@dataclass(frozen=True, slots=True)
class Observed:
    """What the supervisor saw of one run, from outside the sandbox."""

    ready: bool
    timed_out: bool
    returncode: int | None
    memory_exceeded: bool = False
    processes_refused: int = 0  # forks and new threads the control group refused at its task limit
    cpu_seconds: float | None = None
    output_bytes: int = 0
    cpu_stopped_at: float | None = None  # the run's CPU time when the supervisor stopped it for cpu_seconds


def world_executable(path: str) -> bool:
    """Can another uid run this file: the file and every directory above it are readable/searchable by others."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


@cache
def shared_python() -> str | None:
    """An interpreter another uid can run: this one if its install is world-readable, else a system one."""
    this = getattr(sys, "_base_executable", "") or sys.executable
    if this and world_executable(this) and world_executable(sysconfig.get_paths()["stdlib"]):
        return this
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(candidate) and world_executable(candidate):
            return candidate
    return None


def _proc_files(name: str, read: Callable[[Path], ContentT]) -> Iterator[tuple[str, ContentT]]:
    """``(pid, read(/proc/<pid>/<name>))`` for every process the host's ``/proc`` lists; one whose file cannot
    be read (it ended meanwhile, or is not ours to read) is passed over."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            content = read(Path(entry.path, name))
        except OSError:
            continue
        yield entry.name, content


def processes_of(uid: int) -> list[tuple[int, int]]:
    """Live (non-zombie) processes whose real or effective uid is ``uid``, with their thread counts."""
    found = []
    for pid, status in _proc_files("status", Path.read_text):
        uids = state = threads = ""
        for line in status.splitlines():
            if line.startswith("Uid:"):
                uids = line
            elif line.startswith("State:"):
                state = line
            elif line.startswith("Threads:"):
                threads = line
        fields = uids.split()
        if len(fields) >= 3 and str(uid) in fields[1:3] and " Z " not in state + " ":
            count = threads.split()[1] if len(threads.split()) > 1 else "1"
            found.append((int(pid), int(count) if count.isdigit() else 1))
    return found


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user + system) of ``root`` and every process below it, from the host's ``/proc``.

    The fallback meter where no control group counts a run: a process that ended and was waited for is in its
    parent's ``cutime``/``cstime``; one not yet waited for is still listed (a zombie keeps its times).
    """
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for name, record in _proc_files("stat", Path.read_bytes):
        fields = record[record.rfind(b")") + 2 :].split()  # after "pid (comm) ": the command may hold spaces
        if len(fields) < 15:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        ticks[pid] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    total, pending, seen = 0, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += ticks.get(pid, 0)
        pending += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def kill_uid(uid: int) -> None:
    """Kill every process of a per-run uid (a backstop: the PID namespace and control group come first)."""
    for _ in range(100):
        pids = [pid for pid, _ in processes_of(uid)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def wait_gone(pid: int, seconds: float = 5.0) -> None:
    """Wait (bounded) until ``pid`` is dead: for a PID namespace's first process, its whole namespace is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        if "\nState:\tZ" in status or "\nState:\tX" in status:
            return
        time.sleep(0.001)


def write_main(workdir: str, code: str, identity: tuple[int, int] | None) -> None:
    main = Path(workdir, "main.py")
    main.write_bytes(code.encode("utf-8", errors="surrogatepass"))
    os.chmod(workdir, 0o700)
    if identity is not None:
        for path in (workdir, main):
            os.chown(path, *identity)


def read_bounded(path: Path, limit: int) -> tuple[str, bool]:
    with path.open("rb") as handle:
        data = handle.read(limit * 4 + 1)
    text = data.decode("utf-8", errors="replace")
    truncated = len(data) > limit * 4 or len(text) > limit
    return text[:limit], truncated


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def read_info(fd: int) -> int | None:
    """bwrap's ``--info-fd`` JSON: the host pid of the sandbox's first process (None when bwrap failed).

    Read on the event loop (no thread hand-off: under load that was several milliseconds of every run).
    """
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            readable = loop.create_future()
            loop.add_reader(fd, _set_once, readable)
            try:
                await readable
            finally:
                loop.remove_reader(fd)
            continue
        if not chunk:
            return None
        data += chunk
        with contextlib.suppress(ValueError):
            pid = json.loads(data).get("child-pid")
            return pid if isinstance(pid, int) else None


@cache
def find_setpriv() -> str | None:
    return shutil.which("setpriv") or next((p for p in SETPRIV_CANDIDATES if os.access(p, os.X_OK)), None)


def as_user(identity: tuple[int, int] | None) -> tuple[list[str], dict[str, Any]]:
    """How to start a program as the per-run uid: an argv prefix and/or subprocess credentials.

    util-linux's ``setpriv`` switches uid, gid and groups and then executes the program, so the server is
    spawned with ``vfork`` as usual; Python's own ``user=``/``group=`` make it ``fork`` the whole server
    instead, which costs ~12 ms per run for a 600 MB process. Without ``setpriv``, the credentials.
    """
    if identity is None:
        return [], {}
    setpriv = find_setpriv()
    uid, gid = identity
    if setpriv is not None:
        return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"], {}
    return [], {"user": uid, "group": gid, "extra_groups": []}


def drain_ready(fd: int) -> bool:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b"1"
    except BlockingIOError:
        return False
