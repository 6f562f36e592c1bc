"""The sandbox supervisor: runs untrusted code under the operating system's boundary and judges how it ended.

It knows nothing of techniques: :mod:`routegate.technique.code` turns a model's code block into a run here.

The operating system is the boundary (``mode="os"``, the default). Each run is started through bubblewrap
(:mod:`._bwrap`) as a fresh per-run uid (when the server is root) in new user, mount, PID, network,
IPC, UTS and cgroup namespaces: a read-only file system holding only the interpreter, its standard library
and shared libraries; private size-limited tmpfs mounts for the working directory and ``/tmp``; ``/proc`` of
its own PID namespace; ``/dev/null``, ``/dev/zero`` and ``/dev/urandom``. Before the code runs, the bootstrap
(:mod:`._boot`) sets the resource limits and installs a seccomp filter (:mod:`._seccomp`)
that refuses ``execve``, ``ptrace`` and the namespace, mount and kernel-extension calls. When the server is
root, a per-run control group (:mod:`._cgroup`) holds every process of the run, bounds its memory
and task count, and gives the supervisor counters the code cannot write.

The verdict is the supervisor's own observation: its wall clock, the exit status, the control group's OOM,
task-limit and CPU counters, and the size of the output files. With a group, the group's task limit is the only
one that can refuse a run's fork first, so a run that reaches it always ends ``sandbox_processes:limit``
(:func:`_backstop_nproc`). Without one (not root) ``RLIMIT_NPROC`` is the limit, counted in the run's own
user namespace (Linux 5.14 and later; an older kernel, which counts the whole uid, is refused). ``cpu_seconds`` holds for the run as a whole:
while it runs the supervisor reads the CPU time of all its processes (the control group's counter, or
``/proc`` without a group) and stops it at the limit; ``RLIMIT_CPU`` is only each process's backstop. Nothing the code prints decides a stop
reason. When ``run()`` returns, every process of the run is gone (the PID namespace dies with its first
process; the control group is emptied and removed) and so are its files (the tmpfs mounts die with the mount
namespace).

Where the mechanism is missing (not Linux, no ``bwrap``, no user namespaces) a run stops with
``sandbox_error:unavailable`` and a message naming what is missing; :meth:`SandboxRunner.check` raises
:class:`~routegate.errors.ConfigurationError` for entry points that want to fail at start-up. ``mode="guard"``
is the explicit opt-in to the old in-process audit hook plus limits: it is not a security boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from routegate.core._fields import fields_dict
from routegate.core.outcome import HasStopReason
from routegate.core.stop_reasons import SUCCESS
from routegate.errors import ConfigurationError
from routegate.sandbox import stop_reasons as ssr
from routegate.sandbox._boot import encode_config
from routegate.sandbox._bwrap import command, find_bwrap, missing_mechanism, nproc_counting
from routegate.sandbox._cgroup import RunGroup
from routegate.sandbox._host import (
    Observed,
    Pipes,
    as_user,
    drain_ready,
    kill_uid,
    processes_of,
    read_bounded,
    read_info,
    shared_python,
    tree_cpu_seconds,
    wait_gone,
    world_executable,
    write_main,
)
from routegate.sandbox._seccomp import build_filter

logger = logging.getLogger(__name__)

_BOOT = Path(__file__).with_name("_boot.py")  # its source is passed to the sandbox's python -c
_RUN_UIDS = (1_000_000, 1_999_999)
_SANDBOX_OVERHEAD_TASKS = 2  # bwrap's init (pid 1 of the namespace) and the interpreter's main thread
_CPU_CORES = 1.0  # the control group's CPU bandwidth: a run uses at most one CPU's worth of time per second
_CPU_POLL_SECONDS = 0.05  # how often the supervisor reads the run's CPU time (the overshoot is at most this much)

Mode = Literal["os", "guard"]


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-run limits. Seconds are wall clock (parent) and CPU (kernel); bytes are memory, file and tmpfs size.

    ``memory_bytes`` is the control group's memory limit (resident memory plus the tmpfs contents) when a
    group can be made, else the address-space limit. ``tmpfs_bytes`` bounds each of the two tmpfs mounts
    (the working directory and ``/tmp``).
    """

    wall_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 512 * 1024 * 1024
    max_processes: int = 16
    max_file_bytes: int = 16 * 1024 * 1024
    max_output_chars: int = 64_000
    tmpfs_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        names = ("cpu_seconds", "memory_bytes", "max_processes", "max_file_bytes", "max_output_chars", "tmpfs_bytes")
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"SandboxLimits.{name} must be an integer >= 1, got {value!r}")
        wall = self.wall_seconds
        if isinstance(wall, bool) or not isinstance(wall, int | float) or not 0 < wall < 3600:
            raise ConfigurationError(f"SandboxLimits.wall_seconds must be in (0, 3600), got {wall!r}")
        if self.memory_bytes < 32 * 1024 * 1024:
            raise ConfigurationError(f"SandboxLimits.memory_bytes must be >= 32 MiB, got {self.memory_bytes}")


async def _start(
    argv: list[str], outdir: Path, *, prefix: Sequence[str] = (), **options: Any
) -> asyncio.subprocess.Process | str:
    """Start ``argv`` (after ``prefix``: ``setpriv``'s, if any) in a session of its own, with no input and its
    output in ``outdir``'s ``stdout`` and ``stderr`` files; or say why it could not start (``argv[0]`` named)."""
    with (outdir / "stdout").open("wb") as out, (outdir / "stderr").open("wb") as err:
        try:
            return await asyncio.create_subprocess_exec(
                *prefix,
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                **options,
            )
        except OSError as exc:
            return f"could not start {argv[0]!r}: {exc}"


@dataclass(frozen=True, slots=True)
class CodeRun(HasStopReason):
    """The result of one sandboxed run: how it ended, the exit code and the (bounded) output."""

    language: str
    stop_reason: str
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: float
    truncated: bool = False
    isolation: tuple[str, ...] = ()
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self) | {"duration_ms": round(self.duration_ms, 3), "isolation": list(self.isolation)}


@cache
def _bootstrap_source() -> str:
    return _BOOT.read_text(encoding="utf-8")


@cache
def _seccomp_hex() -> str:
    return build_filter().hex()


class SandboxRunner:
    """Runs code in a sandbox. Only Python is built in (``languages``).

    ``mode="os"`` (default): the operating-system boundary described in the module docs. ``mode="guard"``:
    the explicit opt-in to an in-process audit hook plus limits (and, as root, a network namespace and a
    per-run uid) for hosts without bubblewrap; code can switch the hook off, so it is NOT a security boundary
    and each run logs a warning. ``python`` is the interpreter to run (default: one that another uid can run
    — this one when its install is world-readable, else the system ``python3``).
    """

    languages = frozenset({"python"})

    def __init__(self, *, limits: SandboxLimits | None = None, python: str | None = None, mode: Mode = "os") -> None:
        if mode not in ("os", "guard"):
            raise ConfigurationError(f"SandboxRunner mode must be 'os' or 'guard', got {mode!r}")
        self.limits = limits or SandboxLimits()
        self.python = python
        self.mode = mode
        if mode == "guard":
            logger.warning("SandboxRunner(mode='guard'): an in-process audit hook, NOT a security boundary")

    def missing(self) -> str | None:
        """What this host lacks to run code in this mode (None: nothing)."""
        if self.mode == "guard":
            return None
        lacking = missing_mechanism()
        if lacking is None:
            try:
                build_filter()
            except ValueError as exc:
                lacking = f"seccomp: {exc}"
        return lacking or self._short_of_processes()

    def _short_of_processes(self) -> str | None:
        """As root: why this process's ``RLIMIT_NPROC`` cannot hold a run (None: it can).

        bwrap inherits it, and the kernel checks a per-run uid's tasks against it at every fork (the user
        namespaces' own counts). Below what a run may count, a fork bomb would be refused by it instead of the
        control group, and end ``sandbox_exit:1`` instead of ``sandbox_processes:limit``.
        """
        if os.geteuid() != 0:
            return self._uncounted_in_namespace()
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        needed = _backstop_nproc(self.limits) + 1  # bwrap itself runs as the run's uid
        if soft == resource.RLIM_INFINITY or soft >= needed:
            return None
        return (
            f"this process's RLIMIT_NPROC is {soft}, below the {needed} tasks a run with "
            f"max_processes={self.limits.max_processes} may count (bubblewrap, and each of the run's "
            f"{_tasks(self.limits)} tasks in the middle of a fork): raise it (ulimit -u, systemd LimitNPROC=) "
            "or lower max_processes"
        )

    def _uncounted_in_namespace(self) -> str | None:
        """Not root: why ``RLIMIT_NPROC`` cannot hold a run to ``max_processes`` (None: it can).

        With no per-run uid and no control group, ``RLIMIT_NPROC`` is the only task limit, and the sandbox has this
        process's uid. Since Linux 5.14 the kernel checks it against the tasks of the run's own user namespace, so
        the bootstrap sets it to the group's task limit. An older kernel counts every task of the uid, the server's
        included: the same limit could refuse the run's first fork, and one above the uid's count would hold the
        run to nothing it can know. Such a kernel is refused, not run under a weaker limit.
        """
        counting = nproc_counting(find_bwrap() or "bwrap")
        if counting == "namespace":
            return None
        if counting == "uid":
            counting = (
                "this kernel counts RLIMIT_NPROC over every process of the uid (Linux before 5.14), so a run "
                "started by a server that is not root cannot be held to max_processes"
            )
        return (
            f"{counting}: run the server as root (each run then gets its own uid and control group) or on "
            "Linux 5.14 or later"
        )

    def check(self) -> None:
        """Raise :class:`ConfigurationError` when runs would stop with ``sandbox_error:unavailable``."""
        lacking = self.missing()
        if lacking:
            raise ConfigurationError(
                f"the code sandbox cannot run here: {lacking}. Fix that, or pass SandboxRunner(mode='guard') "
                "to opt into the in-process guard, which is not a security boundary"
            )

    def _identity(self) -> tuple[int, int] | None:
        """A per-run uid/gid (root only)."""
        if os.geteuid() != 0:
            return None
        uid = secrets.randbelow(_RUN_UIDS[1] - _RUN_UIDS[0]) + _RUN_UIDS[0]
        return uid, uid

    def _nproc(self, identity: tuple[int, int] | None, overhead: int, *, grouped: bool = False) -> int | None:
        """RLIMIT_NPROC for the child: counted per uid, so only meaningful when it is not root. With a control
        group it is a backstop that never refuses before the group does (:func:`_backstop_nproc`)."""
        if grouped:
            return _backstop_nproc(self.limits)
        if identity is not None:
            return self.limits.max_processes + overhead
        if os.geteuid() == 0:
            return None  # root ignores RLIMIT_NPROC
        if self.mode == "os":
            # counted in the run's own user namespace (missing() refuses a kernel that counts the whole uid): its
            # tasks only, as many as the control group would hold
            return _tasks(self.limits)
        # guard: no user namespace, so the kernel counts every task (thread) of the uid, this process's included
        return sum(threads for _, threads in processes_of(os.getuid())) + self.limits.max_processes

    async def run(self, code: str, language: str = "python") -> CodeRun:
        """Run ``code``; every ending (limits, refusals, errors) is a stop reason on the result."""
        started = time.perf_counter()
        if language not in self.languages:
            return CodeRun(language, ssr.sandbox_error("unsupported_language"), None, "", "", 0.0)
        lacking = self.missing()
        if lacking:
            message = f"the code sandbox cannot run here: {lacking}"
            logger.error("sandbox unavailable: %s", lacking)
            return CodeRun(language, ssr.SANDBOX_UNAVAILABLE, None, "", "", 0.0, message=message)
        python = self.python or shared_python() or sys.executable
        outdir = Path(tempfile.mkdtemp(prefix="routegate-sandbox-out-"))
        try:
            if self.mode == "os":
                return await self._run_os(python, language, code, outdir, started)
            return await self._run_guard(python, language, code, outdir, started)
        finally:
            shutil.rmtree(outdir, ignore_errors=True)

    def _config(
        self,
        identity: tuple[int, int] | None,
        ready_fd: int,
        address_space: int,
        overhead: int,
        *,
        grouped: bool = False,
    ) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "cpu_seconds": self.limits.cpu_seconds,
            "address_space_bytes": address_space,
            "max_file_bytes": self.limits.max_file_bytes,
            "nproc": self._nproc(identity, overhead, grouped=grouped),
            "ready_fd": ready_fd,
            "seccomp": _seccomp_hex() if self.mode == "os" else "",
        }

    async def _run_os(self, python: str, language: str, code: str, outdir: Path, started: float) -> CodeRun:
        limits = self.limits
        identity = self._identity()
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        ready_r, ready_w = os.pipe()
        owned = {info_r, info_w, block_r, block_w, ready_r, ready_w}
        name = f"routegate-sandbox-{secrets.token_hex(6)}"
        group = RunGroup.create(name, limits.memory_bytes, _tasks(limits), cpu_cores=_CPU_CORES)
        # with a control group the memory limit is exact and observed; RLIMIT_AS only stops absurd reservations
        address_space = limits.memory_bytes * 4 if group else limits.memory_bytes
        layers = ["namespaces", "readonly-root", "tmpfs", "seccomp", "rlimits"]
        layers += ["uid"] if identity else []
        layers += ["cgroup"] if group else []
        try:
            with tempfile.TemporaryFile() as code_file:
                code_file.write(code.encode("utf-8", errors="surrogatepass"))  # a lone surrogate: SyntaxError
                code_file.flush()
                code_file.seek(0)
                try:
                    argv = command(
                        find_bwrap() or "bwrap",
                        python,
                        _bootstrap_source(),
                        encode_config(
                            self._config(
                                identity,
                                ready_w,
                                address_space,
                                _SANDBOX_OVERHEAD_TASKS + 1,
                                grouped=group is not None,
                            )
                            | {"go_fd": block_r}
                        ),
                        info_fd=info_w,
                        code_fd=code_file.fileno(),
                        tmpfs_bytes=limits.tmpfs_bytes,
                    )
                except (OSError, ValueError, subprocess.SubprocessError) as exc:
                    return self._failed(language, f"could not prepare {python!r} for the sandbox: {exc}")
                pipes = Pipes(info_r, info_w, block_r, block_w, ready_r, ready_w, owned)
                observed = await self._supervise(argv, pipes, code_file.fileno(), identity, group, outdir)
        finally:
            for fd in owned:
                os.close(fd)
            if group is not None:
                group.kill_all()
                group.remove()
        return self._result(language, observed, outdir, tuple(layers), started)

    def _failed(self, language: str, message: str) -> CodeRun:
        return CodeRun(language, ssr.sandbox_error("start_failed"), None, "", "", 0.0, message=message)

    async def _supervise(
        self,
        argv: list[str],
        pipes: Pipes,
        code_fd: int,
        identity: tuple[int, int] | None,
        group: RunGroup | None,
        outdir: Path,
    ) -> Observed | str:
        prefix, credentials = as_user(identity)
        timed_out = False
        cpu_stopped_at: float | None = None
        child: int | None = None
        child_fd: int | None = None  # a pidfd: signalling it can never reach a recycled pid
        process = await _start(
            argv,
            outdir,
            prefix=prefix,
            pass_fds=(pipes.info_w, pipes.block_r, pipes.ready_w, code_fd),
            env={},
            **credentials,
        )
        if isinstance(process, str):
            return process
        pipes.close_child_ends()
        try:
            async with asyncio.timeout(self.limits.wall_seconds):
                child = await read_info(pipes.info_r)
                if child is not None:
                    with contextlib.suppress(OSError):  # already gone: nothing to stop later
                        child_fd = os.pidfd_open(child)
                # in a thread: on cgroup v1 the move waits for an RCU grace period (~10 ms), the event loop
                # should not; the sandbox meanwhile mounts and starts its interpreter, and waits for "go"
                if child is not None and group is not None and not await asyncio.to_thread(_attach, group, child):
                    return "could not move the run into its control group: nothing ran"
                with contextlib.suppress(BrokenPipeError):  # bwrap already gone: seen below
                    os.write(pipes.block_w, b"go")
                cpu_stopped_at = await self._watch_cpu(process, group, child)
        except TimeoutError:
            timed_out = True
        finally:
            if child_fd is not None:
                if process.returncode is None:
                    # stop the namespace's first process, not bwrap: bwrap reaps it and exits by itself. Killing
                    # bwrap first would leave it to PID 1, which on some hosts never reaps it (a zombie per run)
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(child_fd, signal.SIGKILL)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), 5.0)
                os.close(child_fd)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            if child is not None:
                wait_gone(child)
            if group is None and identity is not None:
                kill_uid(identity[0])
        return Observed(
            ready=drain_ready(pipes.ready_r),
            timed_out=timed_out,
            returncode=process.returncode,
            memory_exceeded=bool(group and group.memory_exceeded()),
            processes_refused=group.refused_tasks() if group else 0,
            cpu_seconds=group.cpu_seconds() if group else None,
            output_bytes=max((outdir / "stdout").stat().st_size, (outdir / "stderr").stat().st_size),
            cpu_stopped_at=cpu_stopped_at,
        )

    async def _watch_cpu(
        self, process: asyncio.subprocess.Process, group: RunGroup | None, child: int | None
    ) -> float | None:
        """Wait for the run to end; stop it early when its processes together used ``cpu_seconds`` of CPU.

        Returns the CPU time seen when the limit was reached (the caller kills the run), None when the run ended
        by itself. Counted by the control group when there is one (dead processes included), else from ``/proc``
        over the run's process tree. ``RLIMIT_CPU`` stays as each process's own backstop.
        """
        if child is None:  # bwrap failed before starting anything: nothing to count
            await process.wait()
            return None
        counted = group if group is not None and group.cpu is not None else None
        waiter = asyncio.ensure_future(process.wait())
        try:
            while True:
                done, _ = await asyncio.wait({waiter}, timeout=_CPU_POLL_SECONDS)
                if done:
                    return None
                if counted is not None:
                    used = counted.cpu_seconds()
                else:
                    used = await asyncio.to_thread(tree_cpu_seconds, child)
                if used is not None and used >= self.limits.cpu_seconds:
                    return used
        finally:
            waiter.cancel()

    async def _run_guard(self, python: str, language: str, code: str, outdir: Path, started: float) -> CodeRun:
        """The opt-in in-process mode: NOT a security boundary (see the class docs)."""
        workdir = tempfile.mkdtemp(prefix="routegate-sandbox-")
        identity = self._identity() if world_executable(python) else None
        ready_r, ready_w = os.pipe()
        layers = ["guard", "rlimits", "not-a-boundary"]
        try:
            write_main(workdir, code, identity)
            if identity is not None:
                layers += ["uid", "netns"]
            config = self._config(identity, ready_w, self.limits.memory_bytes, 1)
            config |= {"workdir": workdir, "isolate_network": os.geteuid() == 0, **_ids(identity)}
            argv = [python, "-I", "-B", "-c", _bootstrap_source(), encode_config(config)]
            observed = await self._supervise_plain(argv, ready_w, ready_r, identity, workdir, outdir)
        finally:
            for fd in (ready_r, ready_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(workdir, ignore_errors=True)
        return self._result(language, observed, outdir, tuple(layers), started)

    async def _supervise_plain(
        self, argv: list[str], ready_w: int, ready_r: int, identity: tuple[int, int] | None, cwd: str, outdir: Path
    ) -> Observed | str:
        timed_out = False
        env = {"PATH": "/usr/bin:/bin", "HOME": cwd, "TMPDIR": cwd, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        process = await _start(argv, outdir, cwd=cwd, env=env, pass_fds=(ready_w,))
        if isinstance(process, str):
            return process
        try:
            await asyncio.wait_for(process.wait(), self.limits.wall_seconds)
        except TimeoutError:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            if identity is not None:
                kill_uid(identity[0])
            await process.wait()
        size = max((outdir / "stdout").stat().st_size, (outdir / "stderr").stat().st_size)
        return Observed(drain_ready(ready_r), timed_out, process.returncode, output_bytes=size)

    def _result(
        self, language: str, observed: Observed | str, outdir: Path, layers: tuple[str, ...], started: float
    ) -> CodeRun:
        if isinstance(observed, str):
            return self._failed(language, observed)
        limit = self.limits.max_output_chars
        stdout, out_cut = read_bounded(outdir / "stdout", limit)
        stderr, err_cut = read_bounded(outdir / "stderr", limit)
        reason, message = self._verdict(observed, stderr)
        elapsed = (time.perf_counter() - started) * 1000.0
        code = observed.returncode
        logger.info("sandbox run language=%s stop_reason=%s exit=%s ms=%.1f", language, reason, code, elapsed)
        return CodeRun(language, reason, code, stdout, stderr, elapsed, out_cut or err_cut, layers, message)

    def _verdict(self, seen: Observed, stderr: str) -> tuple[str, str]:
        """The stop reason from the supervisor's own observations (never from what the code printed)."""
        limits = self.limits
        code = seen.returncode
        if seen.timed_out:
            return ssr.SANDBOX_TIMEOUT_WALL, f"wall_seconds={limits.wall_seconds} reached; the process was killed"
        if not seen.ready:
            first = stderr.strip().splitlines()[-1:] or ["no output"]
            return ssr.SANDBOX_SETUP_FAILED, f"the sandbox could not be set up (exit {code}): {first[0][:300]}"
        if seen.memory_exceeded:
            return ssr.SANDBOX_MEMORY, f"the code went over the {limits.memory_bytes} byte memory limit"
        if seen.processes_refused:
            refused = f"{seen.processes_refused} forks or new threads refused"
            return ssr.SANDBOX_PROCESSES, f"the code hit max_processes={limits.max_processes} ({refused})"
        if seen.cpu_stopped_at is not None:
            used = f"{seen.cpu_stopped_at:.2f}"
            return ssr.SANDBOX_TIMEOUT_CPU, f"cpu_seconds={limits.cpu_seconds} used up ({used} s by all its processes)"
        signal_number = code - 128 if code is not None and code > 128 else (-code if code and code < 0 else 0)
        cpu = seen.cpu_seconds
        if (cpu is None and signal_number == signal.SIGXCPU) or (
            cpu is not None and cpu >= 0.5 * limits.cpu_seconds and signal_number in (signal.SIGXCPU, signal.SIGKILL)
        ):
            return ssr.SANDBOX_TIMEOUT_CPU, f"cpu_seconds={limits.cpu_seconds} used up"
        if seen.output_bytes >= limits.max_file_bytes:
            return ssr.SANDBOX_FILESIZE, f"the output went over max_file_bytes={limits.max_file_bytes}"
        if signal_number and signal_number in signal.valid_signals():
            name = signal.Signals(signal_number).name
            how = "killed by" if code is not None and code < 0 else "ended with status 128+"
            return ssr.sandbox_signal(name), f"the process {how}{name}"
        if code:
            return ssr.sandbox_exit(code), f"the code exited with status {code}"
        return SUCCESS, ""


def _tasks(limits: SandboxLimits) -> int:
    """The control group's task limit: the code's ``max_processes`` and the sandbox's own tasks."""
    return limits.max_processes + _SANDBOX_OVERHEAD_TASKS


def _backstop_nproc(limits: SandboxLimits) -> int:
    """``RLIMIT_NPROC`` inside a run whose control group bounds its tasks: twice the group's task limit.

    The kernel counts a new task against its uid's ``RLIMIT_NPROC`` early in ``fork()`` and against the group's
    ``pids.max`` only at the end, after copying the memory map, and the uid's count includes every fork still in
    progress. With the limit one above the group's (as it was), forks in progress at a full group were refused
    by ``RLIMIT_NPROC`` — five in six of them, measured with six processes forking at once on two CPUs —
    which leaves no trace the supervisor can read; when the run's first process was refused so before any fork
    was refused by the group, the run ended ``sandbox_exit:1`` instead of ``sandbox_processes:limit``. A task is
    inside at most one ``fork()`` at a time, so the count stays at or below twice the group's limit: the group
    refuses first, always, and ``RLIMIT_NPROC`` still bounds a run whose group would not.
    """
    return 2 * _tasks(limits)


def _attach(group: RunGroup, pid: int) -> bool:
    """Put the waiting sandbox into its group; False (the caller kills it unstarted) when the kernel refuses."""
    try:
        group.attach(pid)
    except ProcessLookupError:
        return True  # bwrap already failed: the missing ready byte reports it
    except OSError as exc:
        logger.error("sandbox: could not attach pid %s to %s: %s", pid, group.pids, exc)
        return False
    return True


def _ids(identity: tuple[int, int] | None) -> dict[str, int | None]:
    return {"uid": identity[0] if identity else None, "gid": identity[1] if identity else None}


__all__ = ["CodeRun", "Mode", "SandboxLimits", "SandboxRunner"]
