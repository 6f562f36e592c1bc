"""The sandboxed code runner and the code-block handler (``code:<language>`` targets).

Each run gets a fresh temporary working directory and a subprocess: ``python -I -B -c <bootstrap>`` with a
scrubbed environment, stdin closed, stdout/stderr written to files outside the working directory. The child
(:mod:`._sandbox_boot`) applies the limits to itself before the code runs: ``RLIMIT_CPU``, ``RLIMIT_AS``,
``RLIMIT_FSIZE``, ``RLIMIT_NPROC``, no core dumps; as root it also enters a new network namespace and drops to
a per-run uid (so ``RLIMIT_NPROC`` applies and the OS refuses writes to other users' files); an audit hook
refuses network, writes outside the working directory, running programs and ``ctypes``. The parent enforces
the wall-clock limit, kills the process group and every process left under the per-run uid, and removes the
directory. Every ending is a stop reason (:mod:`routegate.technique.stop_reasons`); a run never raises for
what the code does.

Layers used are reported in :attr:`CodeRun.isolation` (``netns``, ``uid``, ``nproc``, ``guard``). Not root, or
no interpreter readable by another uid: fewer OS layers, the hook still refuses (and forks are refused outright
when no process limit can apply). This is a guard for model-written snippets, not a boundary for hostile code:
for that, run the whole worker in a VM or gVisor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from routegate.core.stop_reasons import SUCCESS
from routegate.core.workers import Worker, WorkerArgs
from routegate.errors import ConfigurationError
from routegate.technique import stop_reasons as tsr
from routegate.technique.types import CodeBlock, OutputKind, TechniqueItem

logger = logging.getLogger(__name__)

_BOOT = Path(__file__).with_name("_sandbox_boot.py")
_MARK = "routegate-sandbox:"
_NOBODY = 65534
_RUN_UIDS = (1_000_000, 1_999_999)
MAX_CODE_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Per-run limits. Seconds are wall clock (parent) and CPU (kernel); bytes are address space and file size."""

    wall_seconds: float = 10.0
    cpu_seconds: int = 5
    memory_bytes: int = 512 * 1024 * 1024
    max_processes: int = 16
    max_file_bytes: int = 16 * 1024 * 1024
    max_output_chars: int = 64_000

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_bytes", "max_processes", "max_file_bytes", "max_output_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"SandboxLimits.{name} must be an integer >= 1, got {value!r}")
        wall = self.wall_seconds
        if isinstance(wall, bool) or not isinstance(wall, int | float) or not 0 < wall < 3600:
            raise ConfigurationError(f"SandboxLimits.wall_seconds must be in (0, 3600), got {wall!r}")
        if self.memory_bytes < 32 * 1024 * 1024:
            raise ConfigurationError(f"SandboxLimits.memory_bytes must be >= 32 MiB, got {self.memory_bytes}")


@dataclass(frozen=True, slots=True)
class CodeRun:
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

    @property
    def ok(self) -> bool:
        return self.stop_reason == SUCCESS

    def to_dict(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "stop_reason": self.stop_reason,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration_ms": round(self.duration_ms, 3),
            "truncated": self.truncated,
            "isolation": list(self.isolation),
            "message": self.message,
        }


@cache
def _bootstrap_source() -> str:
    return _BOOT.read_text(encoding="utf-8")


def _world_executable(path: str) -> bool:
    """Can another uid run this file: the file and every directory above it are readable/searchable by others."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & stat.S_IXOTH:
            return False
        return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)
    except OSError:
        return False


@cache
def _shared_python() -> str | None:
    """An interpreter another uid can run: this one if its install is world-readable, else a system one."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if candidate and os.path.exists(candidate) and _world_executable(candidate):
            return candidate
    return None


def _processes_of(uid: int) -> list[tuple[int, int]]:
    """Live (non-zombie) processes whose real or effective uid is ``uid``, with their thread counts."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
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
            found.append((int(entry.name), int(count) if count.isdigit() else 1))
    return found


def _kill_uid(uid: int) -> None:
    """Kill every process of a per-run uid (the sandboxed code may have escaped its process group)."""
    for _ in range(100):
        pids = [pid for pid, _ in _processes_of(uid)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _write_main(workdir: str, code: str, identity: tuple[int, int] | None) -> None:
    main = Path(workdir, "main.py")
    main.write_text(code, encoding="utf-8")
    os.chmod(workdir, 0o700)
    if identity is not None:
        os.chown(main, *identity)


def _read_bounded(path: Path, limit: int) -> tuple[str, bool]:
    with path.open("rb") as handle:
        data = handle.read(limit * 4 + 1)
    text = data.decode("utf-8", errors="replace")
    truncated = len(data) > limit * 4 or len(text) > limit
    return text[:limit], truncated


def _split_markers(stderr: str) -> tuple[str, list[str], tuple[str, ...]]:
    """Separate the bootstrap's marker lines from the program's stderr."""
    violations: list[str] = []
    isolation: tuple[str, ...] = ()
    kept: list[str] = []
    for line in stderr.split("\n"):
        if line.startswith(_MARK):
            kind, _, detail = line[len(_MARK) :].partition(":")
            if kind == "violation":
                violations.append(detail.strip())
            elif kind == "isolation" and not isolation:  # the bootstrap's own line comes first
                isolation = tuple(part for part in detail.strip().split(",") if part)
            if kept and kept[-1] == "":
                kept.pop()  # the bootstrap writes a newline before each marker
            continue
        kept.append(line)
    return "\n".join(kept), violations, isolation


class SandboxRunner:
    """Runs code in a sandboxed subprocess. Only Python is built in (``languages``).

    ``python`` is the interpreter to use (default: one that another uid can run — this one when its install is
    world-readable, else the system ``python3``). ``allow_exec`` lets the code start other programs (they are
    outside the interpreter guard: only the OS layers apply to them). ``guard=False`` turns the audit-hook
    tripwire off — only to test that the OS layers hold on their own.
    """

    languages = frozenset({"python"})

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        python: str | None = None,
        allow_exec: bool = False,
        isolate_network: bool = True,
        drop_privileges: bool = True,
        guard: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.python = python
        self.allow_exec = allow_exec
        self.isolate_network = isolate_network
        self.drop_privileges = drop_privileges
        self.guard = guard

    def _identity(self, workdir: str) -> tuple[int, int] | None:
        """A per-run uid/gid owning ``workdir`` (root only), or nobody when the uid range is not mapped."""
        if os.geteuid() != 0 or not self.drop_privileges:
            return None
        for uid in (secrets.randbelow(_RUN_UIDS[1] - _RUN_UIDS[0]) + _RUN_UIDS[0], _NOBODY):
            try:
                os.chown(workdir, uid, uid)
            except OSError:
                continue
            return uid, uid
        return None

    def _nproc(self, identity: tuple[int, int] | None) -> int | None:
        """RLIMIT_NPROC for the child: counted per uid, so only meaningful when it is not root."""
        if identity is not None:
            return self.limits.max_processes + 1
        if os.geteuid() == 0:
            return None  # root ignores RLIMIT_NPROC: the guard refuses forks instead
        # the kernel counts every task (thread) of the uid, this process's and its siblings' included
        return sum(threads for _, threads in _processes_of(os.getuid())) + self.limits.max_processes

    async def run(self, code: str, language: str = "python") -> CodeRun:
        """Run ``code``; every ending (limits, refusals, errors) is a stop reason on the result."""
        started = time.perf_counter()
        if language not in self.languages:
            return CodeRun(language, tsr.sandbox_error("unsupported_language"), None, "", "", 0.0)
        python = self.python or _shared_python() or sys.executable
        workdir = tempfile.mkdtemp(prefix="routegate-sandbox-")
        outdir = tempfile.mkdtemp(prefix="routegate-sandbox-out-")
        identity = self._identity(workdir) if _world_executable(python) else None
        try:
            _write_main(workdir, code, identity)
            config = {
                "workdir": workdir,
                "cpu_seconds": self.limits.cpu_seconds,
                "memory_bytes": self.limits.memory_bytes,
                "max_file_bytes": self.limits.max_file_bytes,
                "nproc": self._nproc(identity),
                "uid": identity[0] if identity else None,
                "gid": identity[1] if identity else None,
                "isolate_network": self.isolate_network and os.geteuid() == 0,
                "allow_exec": self.allow_exec,
                "guard": self.guard,
            }
            return await self._execute(python, language, config, workdir, Path(outdir), identity, started)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(outdir, ignore_errors=True)

    async def _execute(
        self,
        python: str,
        language: str,
        config: dict[str, Any],
        workdir: str,
        outdir: Path,
        identity: tuple[int, int] | None,
        started: float,
    ) -> CodeRun:
        boot = _bootstrap_source()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
        }
        stdout_path, stderr_path = outdir / "stdout", outdir / "stderr"
        timed_out = False
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            try:
                process = await asyncio.create_subprocess_exec(
                    python,
                    "-I",
                    "-B",
                    "-c",
                    boot,
                    json.dumps(config),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    cwd=workdir,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                message = f"could not start {python!r}: {exc}"
                return CodeRun(language, tsr.sandbox_error("start_failed"), None, "", "", 0.0, message=message)
            try:
                await asyncio.wait_for(process.wait(), self.limits.wall_seconds)
            except TimeoutError:
                timed_out = True
            finally:
                self._reap(process.pid, identity)
                await process.wait()
        stdout, out_cut = _read_bounded(stdout_path, self.limits.max_output_chars)
        raw_err, err_cut = _read_bounded(stderr_path, self.limits.max_output_chars + 4096)
        stderr, violations, isolation = _split_markers(raw_err)
        if len(stderr) > self.limits.max_output_chars:
            stderr, err_cut = stderr[: self.limits.max_output_chars], True
        code = process.returncode
        reason, message = self._verdict(violations, timed_out, code)
        elapsed = (time.perf_counter() - started) * 1000.0
        logger.info("sandbox run language=%s stop_reason=%s exit=%s ms=%.1f", language, reason, code, elapsed)
        return CodeRun(language, reason, code, stdout, stderr, elapsed, out_cut or err_cut, isolation, message)

    def _verdict(self, violations: list[str], timed_out: bool, code: int | None) -> tuple[str, str]:
        limits = self.limits
        if violations:
            first = violations[0]
            reason = tsr.VIOLATIONS.get(first, tsr.sandbox_error(f"violation_{first}"))
            if first == "memory":
                return reason, f"the code went over the {limits.memory_bytes} byte memory limit"
            if first == "filesize":
                return reason, f"a file or the output went over {limits.max_file_bytes} bytes"
            return reason, f"the sandbox refused the code's {first} access"
        if timed_out:
            return tsr.SANDBOX_TIMEOUT_WALL, f"wall_seconds={limits.wall_seconds} reached; the process was killed"
        if code is not None and code < 0:
            number = -code
            if number == signal.SIGXCPU:
                return tsr.SANDBOX_TIMEOUT_CPU, f"cpu_seconds={limits.cpu_seconds} used up"
            if number == signal.SIGXFSZ:
                return tsr.SANDBOX_FILESIZE, f"a file or the output went over {limits.max_file_bytes} bytes"
            name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
            if number == signal.SIGKILL:
                return tsr.sandbox_signal(name), "killed (CPU hard limit or out of memory)"
            return tsr.sandbox_signal(name), f"the process was killed by {name}"
        if code:
            return tsr.sandbox_exit(code), f"the code exited with status {code}"
        return SUCCESS, ""

    @staticmethod
    def _reap(pid: int, identity: tuple[int, int] | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if identity is not None and identity[0] != _NOBODY:
            _kill_uid(identity[0])


class CodeArgs(WorkerArgs):
    """Arguments of a ``code:<language>`` target: the code, non-blank and bounded."""

    code: Annotated[str, Field(min_length=1, max_length=MAX_CODE_CHARS, pattern=r"\S")]


@dataclass(frozen=True, slots=True)
class CodeHandler:
    """Routes code blocks to ``code:<language>`` targets run by a :class:`SandboxRunner`."""

    runner: SandboxRunner = field(default_factory=SandboxRunner)

    @property
    def kind(self) -> OutputKind:
        return OutputKind.CODE_BLOCK

    @property
    def prefix(self) -> str:
        return "code"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        if not isinstance(item, CodeBlock):
            raise ConfigurationError(f"CodeHandler got a {type(item).__name__}, not a CodeBlock")
        return f"code:{item.language}", {"code": item.code}

    def schema(self, target: str) -> type[BaseModel] | None:
        return CodeArgs

    def worker(self, target: str) -> Worker | None:
        language = target.partition(":")[2]
        if language not in self.runner.languages:
            return None
        runner = self.runner

        async def run_code(code: str) -> CodeRun:
            return await runner.run(code, language)

        return Worker(name=target, fn=run_code, description=f"Run {language} code in the sandbox", args_model=CodeArgs)


__all__ = ["CodeArgs", "CodeHandler", "CodeRun", "SandboxLimits", "SandboxRunner"]
