#!/usr/bin/env python3
"""Per-run start-up cost of the code sandbox: the OS boundary against the old in-process guard.

    .venv/bin/python bench/sandbox.py              # 20 interleaved rounds
    .venv/bin/python bench/sandbox.py --rounds 50

Each round runs ``print(1)`` once per variant, interleaved (A, B, C, A, B, C, ...) so a busy machine slows
all variants alike; figures are the median and the 10th percentile in milliseconds of ``run()`` as the caller
sees it (spawn, set-up, interpreter start, teardown, verdict).

- ``bare interpreter``: ``python -I -B -c print(1)`` through asyncio, no sandbox at all (the floor).
- ``guard (before)``: ``SandboxRunner(mode="guard")`` — the previous mechanism: an audit hook, limits and, as
  root, a network namespace and a per-run uid, in one process.
- ``os (after)``: ``SandboxRunner()`` — bubblewrap namespaces, read-only mounts, tmpfs, seccomp, per-run uid
  and, as root, a per-run control group.


The control group's create + remove is timed on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from routegate.sandbox._cgroup import RunGroup
from routegate.sandbox._host import shared_python
from routegate.sandbox.supervisor import SandboxLimits, SandboxRunner


async def _bare(python: str) -> None:
    process = await asyncio.create_subprocess_exec(
        python, "-I", "-B", "-c", "print(1)", stdout=asyncio.subprocess.DEVNULL
    )
    await process.wait()


async def _measure(rounds: int) -> dict[str, list[float]]:
    limits = SandboxLimits(wall_seconds=30)
    variants = {
        "os (after)": SandboxRunner(limits=limits),
        "guard (before)": SandboxRunner(limits=limits, mode="guard"),
    }
    python = shared_python() or sys.executable
    times: dict[str, list[float]] = {"bare interpreter": [], **{name: [] for name in variants}}
    for runner in variants.values():  # warm caches (interpreter probe, page cache)
        await runner.run("print(1)")
    for _ in range(rounds):
        started = time.perf_counter()
        await _bare(python)
        times["bare interpreter"].append((time.perf_counter() - started) * 1000)
        for name, runner in variants.items():
            started = time.perf_counter()
            run = await runner.run("print(1)")
            times[name].append((time.perf_counter() - started) * 1000)
            assert run.ok, (name, run)
    return times


def _cgroup_ms(rounds: int) -> float | None:
    samples = []
    for index in range(rounds):
        started = time.perf_counter()
        group = RunGroup.create(f"routegate-bench-{index}", 256 * 1024 * 1024, 32)
        if group is None:
            return None
        group.kill_all()
        group.remove()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    missing = SandboxRunner().missing()
    if missing:
        print(f"the OS sandbox is unavailable here: {missing}")
        return 1
    times = asyncio.run(_measure(args.rounds))
    print(f"sandbox start-up: ms per run of print(1), {args.rounds} interleaved rounds\n")
    print("| variant | median ms | p10 ms |")
    print("|---|---:|---:|")
    for name, samples in times.items():
        p10 = statistics.quantiles(samples, n=10)[0] if len(samples) >= 2 else samples[0]
        print(f"| {name} | {statistics.median(samples):.1f} | {p10:.1f} |")
    added = statistics.median(times["os (after)"]) - statistics.median(times["guard (before)"])
    print(f"\nadded by the OS boundary (median after - median before): {added:+.1f} ms")
    group = _cgroup_ms(args.rounds)
    print(f"control group create + remove: {group:.2f} ms" if group is not None else "no control group here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
