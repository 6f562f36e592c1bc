"""What serialising a session across processes costs: the PostgreSQL advisory lock every desk turn holds
(``routegate.apps.support.advisory``), on the embedded PostgreSQL, in one process.

* ``hold``: one uncontended hold (take + let go: two round trips on the locks' own connection), one after the
  other and 32 at once (distinct sessions: the shared connection is the only queue), beside one pooled
  ``SELECT 1`` for scale; wall time and this process's CPU time per hold.
* ``turn``: whole desk turns (the spec's five messages, one session per client) with the lock and with it switched
  off, in alternating blocks so a shared machine's drift spreads over both; wall and CPU time per turn, and
  turns/s at 32 clients. With the lock, a client's next turn that comes while its session's lock is still held
  also reads no history (``routegate.apps.support.memory``): the difference is the lock's cost less that.
* ``handoff``: two lock objects (two processes) ping-pong one session: how long after one lets go the other is in
  (the waiter retries after 2, 4 … 50 ms).

    .venv/bin/python bench/session_lock.py [--holds 3000] [--turns 600] [--blocks 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from routegate.apps.support.advisory import AdvisoryLocks
from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from server_load import MIXES, cpu_probe_seconds

DB_DIR: list[Path] = []  # the embedded PostgreSQL's data directory, once started


def db_cpu_seconds() -> float:
    """CPU seconds used so far by the embedded PostgreSQL: its postmaster and every process below it (the
    backends serving this process's connections among them), from /proc."""
    if not DB_DIR:
        return 0.0
    root = int((DB_DIR[0] / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == root or int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


@contextlib.contextmanager
def clock() -> Iterator[dict[str, float]]:
    out: dict[str, float] = {}
    wall, cpu, db = time.perf_counter(), time.process_time(), db_cpu_seconds()
    yield out
    out["wall"], out["cpu"] = time.perf_counter() - wall, time.process_time() - cpu
    out["db"] = db_cpu_seconds() - db


async def repeat(n: int, concurrency: int, one: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    async def worker(w: int) -> None:
        for i in range(w, n, concurrency):
            await one(i)

    with clock() as spent:
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return spent


async def holds(url: str, db: SupportDatabase, n: int) -> None:
    locks = AdvisoryLocks(url)
    prefix = uuid.uuid4().hex

    async def hold(i: int) -> None:
        async with locks.hold(f"bench:{prefix}:{i}", within=60):
            pass

    async def select(i: int) -> None:
        async with db.connection() as conn:
            await conn.execute("SELECT 1")

    await repeat(200, 1, hold)  # connect, prepare
    print(f"\nhold (n={n})               wall us/op   cpu us/op   db cpu us/op   ops/s")
    for name, one in (("hold", hold), ("pooled SELECT 1", select)):
        for concurrency in (1, 32):
            spent = await repeat(n, concurrency, one)
            print(
                f"  {name:<16} c={concurrency:<3} {spent['wall'] / n * 1e6:10.0f} {spent['cpu'] / n * 1e6:11.0f}"
                f" {spent['db'] / n * 1e6:14.0f} {n / spent['wall']:7.0f}"
            )
    await locks.close()


async def turns(desk: SupportAgent, n: int, blocks: int) -> None:
    locked = desk.memory.hold
    questions = MIXES["spec"]

    def unlocked(session_id: str, *, within: float) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    print(f"\nturns ({n} per block, alternating blocks)   c   wall ms/turn  cpu ms/turn  db cpu ms/turn  turns/s")
    figures: dict[tuple[str, int], list[dict[str, float]]] = {}
    for block in range(blocks):
        order = (("lock", locked), ("no lock", unlocked))
        for name, hold in order if block % 2 == 0 else order[::-1]:
            desk.memory.hold = hold  # type: ignore[method-assign]  # the switch this benchmark measures
            for concurrency in (1, 32):
                run = uuid.uuid4().hex[:8]

                async def turn(i: int, concurrency: int = concurrency, run: str = run) -> None:
                    await desk.ask(questions[i // concurrency % len(questions)], session_id=f"{run}-{i % concurrency}")

                figures.setdefault((name, concurrency), []).append(await repeat(n, concurrency, turn))
    desk.memory.hold = locked  # type: ignore[method-assign]
    for (name, concurrency), runs in sorted(figures.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        wall = statistics.median(r["wall"] for r in runs) / n
        cpu = statistics.median(r["cpu"] for r in runs) / n
        db = statistics.median(r["db"] for r in runs) / n
        print(
            f"  {name:<38} {concurrency:>3} {wall * 1e3:12.2f} {cpu * 1e3:12.2f} {db * 1e3:15.2f}"
            f" {1 / wall:8.0f}   (medians)"
        )


async def handoff(url: str, rounds: int) -> None:
    a, b = AdvisoryLocks(url), AdvisoryLocks(url)
    name = f"bench:{uuid.uuid4().hex}"
    gaps: list[float] = []
    for _ in range(rounds):
        async with a.hold(name, within=60):

            async def waiter() -> float:
                async with b.hold(name, within=60):
                    return time.perf_counter()

            task = asyncio.create_task(waiter())
            await asyncio.sleep(0.02)  # the waiter is retrying by now (the point of this figure)
            let_go_at = time.perf_counter()
        gaps.append(await task - let_go_at)
    gaps.sort()
    print(
        f"\nhandoff between two processes ({rounds} rounds): p50 {statistics.median(gaps) * 1e3:.1f} ms,"
        f" max {gaps[-1] * 1e3:.1f} ms after the holder let go"
    )
    await a.close()
    await b.close()


async def main_async(args: argparse.Namespace) -> None:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, CPU probe {cpu_probe_seconds():.2f} s")
    workdir = Path(tempfile.mkdtemp(prefix="routegate-bench-lock-"))
    server = EmbeddedPostgres(workdir / "pg")
    try:
        url = server.start()
        DB_DIR.append(workdir / "pg")
        encoder = MiniLMEncoder()
        encoder.warm_up()
        fitted = FittedSemanticLayer.load_or_fit(encoder, workdir)
        async with SupportDatabase(url, max_size=4) as db:
            desk = SupportAgent(db=db, encoder=encoder, semantic=fitted)
            await desk.start()
            await holds(url, db, args.holds)
            await turns(desk, args.turns, args.blocks)
            await handoff(url, args.handoffs)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--holds", type=int, default=3000)
    parser.add_argument("--turns", type=int, default=600, help="turns per block and concurrency (default 600)")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks (default 4)")
    parser.add_argument("--handoffs", type=int, default=30)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
