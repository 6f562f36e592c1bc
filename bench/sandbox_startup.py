#!/usr/bin/env python3
"""Where a sandbox run's start-up time goes: ``print(1)`` through each added layer, interleaved, medians.

    .venv/bin/python bench/sandbox_startup.py              # 30 interleaved rounds
    .venv/bin/python bench/sandbox_startup.py --rounds 60 --python /usr/bin/python3

Every round runs each variant once, in turn, so a busy machine slows all of them alike. Each figure is the
wall time of one ``print(1)`` as a caller sees it, spawned through asyncio. The variants add one layer each:

- ``bare -I -S``: the sandbox's interpreter on the host, ``python -I -S -c print(1)`` (the floor);
- ``bare -I``: the same with ``site`` imported (what the bootstrap used to pay);
- ``bwrap, namespaces``: bubblewrap creating the user, mount, PID, network, IPC, UTS and cgroup namespaces
  around ``-I -S`` with the whole host file system bound read-only (namespace set-up, no per-run mounts);
- ``bwrap, sandbox mounts``: the runner's own bubblewrap command line (its mounts: interpreter at its fixed
  path, tmpfs, ``/proc``, devices) around ``-I -S -c print(1)`` — no bootstrap;
- ``bootstrap``: the runner's command line with the bootstrap (limits, seccomp filter, ``main.py``) — what
  ``run()`` starts, without the supervisor;
- ``SandboxRunner.run``: the whole run — supervisor pipes, per-run uid and control group (as root), output files,
  the verdict.

The filter's build (once per process) and the control group's create + remove are timed on their own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from routegate.sandbox._boot import encode_config
from routegate.sandbox._bwrap import command, find_bwrap
from routegate.sandbox._cgroup import RunGroup
from routegate.sandbox._host import shared_python
from routegate.sandbox._python import interpreter
from routegate.sandbox._seccomp import build_filter
from routegate.sandbox.supervisor import SandboxLimits, SandboxRunner, _bootstrap_source, _seccomp_hex

PRINT = ("-I", "-S", "-c", "print(1)")
LAYERED_ON = {  # each variant's figure is compared with the one it adds a layer to
    "bare -I": "bare -I -S",
    "bwrap, namespaces": "bare -I -S",
    "bwrap, sandbox mounts": "bwrap, namespaces",
    "bootstrap": "bwrap, sandbox mounts",
    "SandboxRunner.run": "bootstrap",
}


async def _spawn(argv: list[str], pass_fds: tuple[int, ...] = ()) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, pass_fds=pass_fds
    )
    if await process.wait() != 0:
        raise RuntimeError(f"{argv[:3]}... exited with {process.returncode}")


def _runner_argv(python: str, bootstrap: bool) -> tuple[list[str], list[int]]:
    """The runner's bwrap argv (as the runner builds it) and the descriptors it needs, already prepared."""
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    ready_r, ready_w = os.pipe()
    os.write(block_w, b"go")
    code, path = tempfile.mkstemp()
    os.unlink(path)
    os.write(code, b"print(1)\n")
    os.lseek(code, 0, os.SEEK_SET)
    settings = {"mode": "os", "cpu_seconds": 5, "address_space_bytes": 2**31, "max_file_bytes": 2**24, "nproc": None}
    config = encode_config(settings | {"ready_fd": ready_w, "go_fd": block_r, "seccomp": _seccomp_hex()})
    argv = command(
        find_bwrap() or "bwrap",
        python,
        _bootstrap_source(),
        config,
        info_fd=info_w,
        code_fd=code,
        tmpfs_bytes=64 * 1024 * 1024,
    )
    if not bootstrap:
        argv = argv[: argv.index("--") + 2] + list(PRINT)
    fds = [info_r, info_w, block_r, block_w, ready_r, ready_w, code]
    return argv, fds


async def _through_bwrap(python: str, bootstrap: bool) -> None:
    argv, fds = _runner_argv(python, bootstrap)
    try:
        await _spawn(argv, pass_fds=(fds[1], fds[2], fds[5], fds[6]))
    finally:
        for fd in fds:
            os.close(fd)


def _namespaces_only(bwrap: str, python: str) -> list[str]:
    namespaces = [bwrap, "--unshare-all", "--unshare-user", "--as-pid-1", "--die-with-parent"]
    return [*namespaces, "--ro-bind", "/", "/", "--proc", "/proc", "--", os.path.realpath(python), *PRINT]


async def _measure(rounds: int, python: str) -> dict[str, list[float]]:
    bwrap = find_bwrap() or "bwrap"
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=30), python=python)
    interpreter(python)  # the one probe per interpreter, outside the timing (cached like the runner's)

    async def run() -> None:
        result = await runner.run("print(1)")
        if not result.ok:
            raise RuntimeError(f"sandbox run failed: {result.stop_reason} {result.message}")

    variants: dict[str, Callable[[], Awaitable[None]]] = {
        "bare -I -S": lambda: _spawn([python, *PRINT]),
        "bare -I": lambda: _spawn([python, "-I", "-c", "print(1)"]),
        "bwrap, namespaces": lambda: _spawn(_namespaces_only(bwrap, python)),
        "bwrap, sandbox mounts": lambda: _through_bwrap(python, bootstrap=False),
        "bootstrap": lambda: _through_bwrap(python, bootstrap=True),
        "SandboxRunner.run": run,
    }
    for variant in variants.values():  # warm the page cache and the runner's caches
        await variant()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, variant in variants.items():
            started = time.perf_counter()
            await variant()
            times[name].append((time.perf_counter() - started) * 1000)
    return times


def _once(what: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        what()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _cgroup() -> None:
    group = RunGroup.create(f"routegate-bench-{os.getpid()}", 256 * 1024 * 1024, 32, cpu_cores=1.0)
    if group is not None:
        group.kill_all()
        group.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--python", help="the interpreter to run (default: the runner's own choice)")
    args = parser.parse_args()
    python = args.python or shared_python() or sys.executable
    missing = SandboxRunner().missing()
    if missing:
        print(f"the OS sandbox is unavailable here: {missing}")
        return 1
    load = os.getloadavg()[0]
    times = asyncio.run(_measure(args.rounds, python))
    print(f"sandbox start-up, ms per print(1), {args.rounds} interleaved rounds, load average {load:.2f} at the start")
    print(f"interpreter: {python}; as root: {os.geteuid() == 0}\n")
    print("| variant | p50 ms | p90 ms | p50 added, over |")
    print("|---|---:|---:|---|")
    p50s = {name: statistics.median(samples) for name, samples in times.items()}
    for name, samples in times.items():
        p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) >= 2 else samples[0]
        base = LAYERED_ON.get(name)
        added = f"{p50s[name] - p50s[base]:+.1f} over {base}" if base else ""
        print(f"| {name} | {p50s[name]:.1f} | {p90:.1f} | {added} |")
    bare = statistics.median(times["bare -I -S"])
    whole = statistics.median(times["SandboxRunner.run"])
    print(f"\nSandboxRunner.run over the bare interpreter (p50): {whole - bare:+.1f} ms")
    print(f"seccomp filter build (once per process, cached): {_once(build_filter, 200):.3f} ms")
    created = RunGroup.create(f"routegate-bench-probe-{os.getpid()}", 256 * 1024 * 1024, 32, cpu_cores=1.0)
    if created is None:
        print("no control group here")
    else:
        created.remove()
        print(f"control group create + remove: {_once(_cgroup, 50):.2f} ms")
    load_end = os.getloadavg()[0]
    print(f"load average at the end: {load_end:.2f}")
    return 0


if __name__ == "__main__":
    if sys.platform != "linux":
        print("the OS sandbox needs Linux")
        raise SystemExit(1)
    raise SystemExit(main())
