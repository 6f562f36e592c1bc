"""What one support-desk turn costs, by route: SQL statements and round trips to PostgreSQL, the desk process's CPU
and PostgreSQL's CPU per turn, wall p50/p99; then the spec's five messages at 32 concurrent sessions. In one
process (no HTTP), on the embedded PostgreSQL, offline (MiniLM encoder, grounded composer).

* **Statements and round trips** are read from libpq's own protocol trace (``PQtrace``) of every connection the
  desk opens (the pool's and the session locks' own): a statement is a ``CommandComplete`` or ``ErrorResponse``
  the server sent; a round trip is the client waiting for the server, i.e. a server message following a client
  message on one connection (a pipeline of many statements and one ``Sync`` is one round trip). Traced turns run
  one after the other, over eight sessions in turn (the figure a lone turn pays), then one session's turns back
  to back (its lock and its history kept between them); ``--count-load`` also counts the concurrent part.
* **CPU** is ``time.process_time()`` of this process (the desk, its encoder, the driver) and the CPU seconds of the
  PostgreSQL server's processes from ``/proc`` (as ``bench/scale.py --part costs`` does), per turn, untraced.
* ``--profile`` runs the concurrent part under ``cProfile`` and prints the functions that took the most CPU;
  ``--profile-routes POSTGRES,VECTOR`` profiles those routes' turns one at a time (after their timed pass);
  ``--pieces N`` times the turn's database pieces alone (the SQL tool's call, the history read, the memory write,
  a session lock's hold, a session lock's hold with the history read), N calls each.

    .venv/bin/python bench/desk_cost.py [--turns 200] [--load-turns 800] [--concurrency 32] [--profile]
        [--profile-routes POSTGRES,VECTOR] [--pieces 2000] [--count-load]

Keep it short on a shared machine: the default run takes about a minute on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import statistics
import tempfile
import time
import uuid
import weakref
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq

from routegate.apps.support.advisory import RELEASE_LINGER_SECONDS
from routegate.apps.support.contracts import Role
from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.memory import MessageStore
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from server_load import MIXES, cpu_probe_seconds
from session_lock import DB_DIR, db_cpu_seconds

ROUTE_MESSAGES = {
    "POSTGRES": "What is the status of ticket 2?",
    "VECTOR": "How do I reset my password?",
    "EXTERNAL": "What's the weather today?",
    "LLM": "Can you help me?",
}
SESSIONS = 8  # sessions per route, so that the history read finds messages (up to the memory's limit)


class ProtocolTrace:
    """libpq's protocol trace of every connection psycopg opens in this process while :meth:`start` is on."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._conns: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], tuple[str, Path]] = (
            weakref.WeakKeyDictionary()
        )
        self._on = False
        self._original = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]
        trace = self

        async def connect(cls: type[psycopg.AsyncConnection[Any]], *args: Any, **kwargs: Any) -> Any:
            conn = await trace._original(cls, *args, **kwargs)
            path = trace.workdir / f"conn-{uuid.uuid4().hex[:8]}.trace"
            trace._conns[conn] = (str(kwargs.get("application_name") or "pool"), path)
            if trace._on:
                trace._attach(conn, path)
            return conn

        psycopg.AsyncConnection.connect = classmethod(connect)  # type: ignore[method-assign,assignment]

    def _attach(self, conn: psycopg.AsyncConnection[Any], path: Path) -> None:
        conn.pgconn.trace(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def start(self) -> None:
        self._on = True
        for conn, (_, path) in list(self._conns.items()):
            if not conn.closed:
                self._attach(conn, path)

    def stop(self) -> dict[str, Counter[str]]:
        """Untrace (which flushes) and count, per kind of connection: statements, round trips, and the
        statements' leading words."""
        self._on = False
        out: dict[str, Counter[str]] = {}
        for conn, (kind, path) in list(self._conns.items()):
            if not conn.closed:
                conn.pgconn.untrace()
            if not path.exists():
                continue
            counts = out.setdefault(kind, Counter())
            previous = ""
            for line in path.read_text(errors="replace").splitlines():
                fields = line.split("\t")
                if len(fields) < 3:
                    continue
                direction, kind_of = fields[0], fields[2]
                if direction == "B" and previous == "F":
                    counts["round trips"] += 1
                if direction == "B" and kind_of in ("CommandComplete", "ErrorResponse"):
                    counts["statements"] += 1
                    word = fields[3].strip().strip('"').split()[0] if kind_of == "CommandComplete" else "ERROR"
                    counts[f"  {word}"] += 1
                previous = direction if direction in ("F", "B") else previous
            path.unlink()
        return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def counted(
    desk: SupportAgent, trace: ProtocolTrace, turns: int, *, back_to_back: bool = False
) -> dict[str, dict[str, float]]:
    """Statements and round trips per turn, by route: turns one at a time over :data:`SESSIONS` sessions in turn
    (a session's next turn comes after the others', its lock let go meanwhile), or ``back_to_back`` on one session
    (each turn comes as soon as the one before has answered, while its lock's release still waits)."""
    how = "one session's turns back to back" if back_to_back else f"one at a time over {SESSIONS} sessions"
    print(f"\nstatements and round trips per turn (libpq protocol trace, {turns} turns per route, {how})")
    out: dict[str, dict[str, float]] = {}
    for route, message in ROUTE_MESSAGES.items():
        run = uuid.uuid4().hex[:8]
        for i in range(SESSIONS):  # warm: the pool's connections open, the sessions hold history
            await desk.ask(message, session_id=f"count-{run}-{i}")
        await asyncio.sleep(0.05)  # the last session lock's release has gone
        trace.start()
        for i in range(turns):
            result = await desk.ask(message, session_id=f"count-{run}-{0 if back_to_back else i % SESSIONS}")
            assert result.route == route, (message, result.route)
        await asyncio.sleep(0.05)
        per_kind = trace.stop()
        total: Counter[str] = Counter()
        for counts in per_kind.values():
            total.update(counts)
        row = {
            "statements": total["statements"] / turns,
            "round_trips": total["round trips"] / turns,
            **{f"{kind}_round_trips": c["round trips"] / turns for kind, c in per_kind.items()},
        }
        out[route] = row
        words = ", ".join(f"{k.strip()} {v / turns:.2f}" for k, v in sorted(total.items()) if k.startswith("  "))
        by_kind = ", ".join(f"{kind} {c['round trips'] / turns:.2f}" for kind, c in sorted(per_kind.items()))
        print(
            f"  {route:9s} {row['statements']:5.2f} statements, {row['round_trips']:5.2f} round trips"
            f" ({by_kind})\n            statements: {words}"
        )
    return out


async def costed(
    desk: SupportAgent, turns: int, profile_routes: frozenset[str] = frozenset()
) -> dict[str, dict[str, float]]:
    print(f"\nCPU and wall per turn ({turns} turns per route, one at a time, untraced)")
    print(f"  {'route':9s} {'desk CPU ms':>12s} {'PG CPU ms':>10s} {'wall p50 ms':>12s} {'wall p99 ms':>12s}")
    out: dict[str, dict[str, float]] = {}
    for route, message in ROUTE_MESSAGES.items():
        run = uuid.uuid4().hex[:8]
        for i in range(SESSIONS):
            await desk.ask(message, session_id=f"cost-{run}-{i}")
        walls: list[float] = []
        cpu, db = time.process_time(), db_cpu_seconds()
        for i in range(turns):
            started = time.perf_counter()
            await desk.ask(message, session_id=f"cost-{run}-{i % SESSIONS}")
            walls.append(time.perf_counter() - started)
        cpu, db = time.process_time() - cpu, db_cpu_seconds() - db
        row = {
            "desk_cpu_ms": cpu / turns * 1e3,
            "db_cpu_ms": db / turns * 1e3,
            "p50_ms": pct(walls, 0.5) * 1e3,
            "p99_ms": pct(walls, 0.99) * 1e3,
        }
        out[route] = row
        print(
            f"  {route:9s} {row['desk_cpu_ms']:12.2f} {row['db_cpu_ms']:10.2f} {row['p50_ms']:12.2f}"
            f" {row['p99_ms']:12.2f}"
        )
    for route in [r for r in ROUTE_MESSAGES if r in profile_routes]:  # after the timed pass: it slows the turns
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        for i in range(turns):
            await desk.ask(ROUTE_MESSAGES[route], session_id=f"profile-{route}-{i % SESSIONS}")
        profiler.disable()
        report(profiler, turns, f"{route} turns one at a time ({ROUTE_MESSAGES[route]!r})")
    return out


def report(profiler: cProfile.Profile, turns: int, what: str) -> None:
    """The profile's top functions (own and cumulative CPU time) and its own time by package, per turn."""
    print(
        f"\n{what}: the event loop thread's CPU time (cProfile on time.thread_time: top 25 by own time, top 40 by"
        " cumulative time)"
    )
    stats = pstats.Stats(profiler)
    profiler.dump_stats(os.environ.get("DESK_COST_PROFILE", os.devnull))
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    by_package: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        key = filename.split("site-packages/")[-1].split("/src/")[-1].rsplit("/", 1)[0] if "/" in filename else filename
        key = (
            "python stdlib " + key.rsplit("/", 1)[-1]
            if "/lib/python3" in filename and "site-packages" not in filename
            else key
        )
        by_package[key] = by_package.get(key, 0.0) + own
    print("own CPU time by package or folder (top 15)")
    for key, own in sorted(by_package.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {own / turns * 1e3:6.3f} ms/turn  {key}")


async def pieces(db: SupportDatabase, calls: int) -> dict[str, dict[str, float]]:
    """The desk's database pieces one at a time, ``calls`` each: the SQL tool's call (a template's query, seen
    before), the history read, the memory write (one turn's two messages), a session lock's hold (take + release),
    and what a turn does first: a session lock's hold with its history read (the sessions' histories written before,
    so that there is something to read)."""
    print(f"\nthe database pieces of a turn, alone ({calls} calls each, one at a time)")
    print(f"  {'piece':14s} {'desk CPU ms':>12s} {'PG CPU ms':>10s} {'wall ms':>8s}")
    tool, store = PostgresTool(db), MessageStore(db)
    session = f"pieces-{uuid.uuid4().hex[:8]}"
    turn: list[tuple[Role, str]] = [("user", ROUTE_MESSAGES["POSTGRES"]), ("assistant", "Ticket 2 is open.")]

    async def sql_tool(i: int) -> None:
        await tool.run("SELECT id, status FROM tickets WHERE id = :id", {"id": 1 + i % 3})

    async def history_read(i: int) -> None:
        await store.recent(session)

    async def memory_write(i: int) -> None:
        await store.extend(session, turn, context={"ticket": 2})

    async def lock_hold(i: int) -> None:
        async with store.hold(f"{session}-{i % SESSIONS}", within=5.0):
            pass

    async def lock_and_history(i: int) -> None:
        async with store.hold(f"{session}-{i % SESSIONS}", within=5.0):
            await store.recent(f"{session}-{i % SESSIONS}")

    for j in range(SESSIONS):  # the locked sessions hold a full history (ten messages), as a conversation's would
        async with store.hold(f"{session}-{j}", within=5.0):
            await store.extend(f"{session}-{j}", turn * 5, context={"ticket": 2})
    out: dict[str, dict[str, float]] = {}
    for name, piece in (
        ("sql_tool", sql_tool),
        ("history_read", history_read),
        ("memory_write", memory_write),
        ("lock_hold", lock_hold),
        ("lock_history", lock_and_history),
    ):
        for i in range(max(20, calls // 10)):  # warm: prepared statements, the pool's connections
            await piece(i)
        wall, cpu, pg = time.perf_counter(), time.process_time(), db_cpu_seconds()
        for i in range(calls):
            await piece(i)
        await asyncio.sleep(2 * RELEASE_LINGER_SECONDS)  # the last release has gone
        wall, cpu, pg = time.perf_counter() - wall, time.process_time() - cpu, db_cpu_seconds() - pg
        out[name] = {"desk_cpu_ms": cpu / calls * 1e3, "db_cpu_ms": pg / calls * 1e3, "wall_ms": wall / calls * 1e3}
        print(f"  {name:14s} {cpu / calls * 1e3:12.3f} {pg / calls * 1e3:10.3f} {wall / calls * 1e3:8.3f}")
    return out


async def loaded(
    desk: SupportAgent, turns: int, concurrency: int, profile: bool, trace: ProtocolTrace | None = None
) -> dict[str, float]:
    """The spec's five messages, ``concurrency`` sessions at once, each session's turns back to back; with
    ``trace``, first a traced pass of ``turns`` turns that counts statements and round trips per turn."""
    questions = MIXES["spec"]
    run = uuid.uuid4().hex[:8]
    walls: list[float] = []

    async def worker(w: int, n: int) -> None:
        for i in range(w, n, concurrency):
            started = time.perf_counter()
            await desk.ask(questions[i // concurrency % len(questions)], session_id=f"load-{run}-{w}")
            walls.append(time.perf_counter() - started)

    await asyncio.gather(*(worker(w, concurrency * 5) for w in range(concurrency)))  # warm up
    counts: dict[str, float] = {}
    if trace is not None:
        await asyncio.sleep(0.05)  # the warm-up's last releases have gone
        trace.start()
        await asyncio.gather(*(worker(w, turns) for w in range(concurrency)))
        await asyncio.sleep(0.05)
        total: Counter[str] = Counter()
        for kind_counts in trace.stop().values():
            total.update(kind_counts)
        counts = {"statements": total["statements"] / turns, "round_trips": total["round trips"] / turns}
    walls.clear()
    # CPU time of the event loop's thread (wall time would charge it with the database and other threads)
    profiler = cProfile.Profile(time.thread_time) if profile else None
    wall, cpu, db = time.perf_counter(), time.process_time(), db_cpu_seconds()
    if profiler is not None:
        profiler.enable()
    await asyncio.gather(*(worker(w, turns) for w in range(concurrency)))
    if profiler is not None:
        profiler.disable()
    wall, cpu, db = time.perf_counter() - wall, time.process_time() - cpu, db_cpu_seconds() - db
    row = {
        "turns_per_s": turns / wall,
        "desk_cpu_ms": cpu / turns * 1e3,
        "db_cpu_ms": db / turns * 1e3,
        "p50_ms": statistics.median(walls) * 1e3,
        "p99_ms": pct(walls, 0.99) * 1e3,
        **counts,
    }
    if counts:
        print(
            f"\nthe spec's five messages, {concurrency} sessions at once, {turns} turns traced: "
            f"{counts['statements']:.2f} statements, {counts['round_trips']:.2f} round trips per turn"
        )
    print(
        f"\nthe spec's five messages, {concurrency} sessions at once, {turns} turns{' (profiled)' if profile else ''}:"
        f"\n  {row['turns_per_s']:.0f} turns/s, desk {row['desk_cpu_ms']:.2f} ms CPU/turn, PostgreSQL"
        f" {row['db_cpu_ms']:.2f} ms CPU/turn, wall p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms"
    )
    if profiler is not None:
        report(profiler, turns, f"the spec's five messages at concurrency {concurrency}")
    return row


@contextlib.asynccontextmanager
async def offline_desk(url: str, workdir: Path) -> AsyncIterator[tuple[SupportDatabase, SupportAgent]]:
    """The desk the cost benchmarks measure, started on ``url``: offline (MiniLM on one onnxruntime thread, the
    semantic layer fitted or loaded from ``workdir``), a pool of four."""
    encoder = MiniLMEncoder(intra_op_num_threads=1)
    encoder.warm_up()
    fitted = FittedSemanticLayer.load_or_fit(encoder, workdir)
    async with SupportDatabase(url, max_size=4) as db:
        desk = SupportAgent(db=db, encoder=encoder, semantic=fitted)
        await desk.start()
        yield db, desk


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, CPU probe {cpu_probe_seconds():.2f} s")
    workdir = Path(tempfile.mkdtemp(prefix="routegate-bench-cost-"))
    server = EmbeddedPostgres(workdir / "pg")
    trace = ProtocolTrace(workdir)
    results: dict[str, Any] = {}
    try:
        url = server.start()
        DB_DIR.append(workdir / "pg")
        async with offline_desk(url, workdir) as (db, desk):
            if args.pieces:
                results["pieces"] = await pieces(db, args.pieces)
            results["counts"] = await counted(desk, trace, args.count_turns)
            results["counts_back_to_back"] = await counted(desk, trace, args.count_turns, back_to_back=True)
            results["costs"] = await costed(desk, args.turns, args.profile_routes)
            results["load"] = await loaded(
                desk, args.load_turns, args.concurrency, args.profile, trace if args.count_load else None
            )
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count-turns", type=int, default=40, help="traced turns per route (default 40)")
    parser.add_argument("--turns", type=int, default=200, help="timed turns per route (default 200)")
    parser.add_argument("--load-turns", type=int, default=800, help="turns at --concurrency (default 800)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="profile the concurrent part with cProfile")
    parser.add_argument(
        "--profile-routes",
        type=lambda text: frozenset(r.strip().upper() for r in text.split(",") if r.strip()),
        default=frozenset(),
        help="also profile these routes' turns one at a time (comma-separated, e.g. POSTGRES,VECTOR)",
    )
    parser.add_argument(
        "--pieces", type=int, default=0, help="also time the turn's database pieces alone, this many calls each"
    )
    parser.add_argument(
        "--count-load", action="store_true", help="also count statements and round trips in a traced concurrent pass"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
