"""Durable-plan overhead: what a checkpoint after every step costs, per step, beside LangGraph's savers.

The same linear graph of ``--steps`` trivial steps (``n -> n + 1``) runs, one fresh checkpoint key / thread per
run, as:

* routegate ``Plan`` without checkpointing, and with ``checkpoint_key=`` on ``Store()`` (in memory),
  ``Store(db="….sqlite")`` and ``Store(db="postgresql://…")`` (an embedded PostgreSQL started here);
* LangGraph ``StateGraph`` without a checkpointer, with ``SqliteSaver`` and with ``PostgresSaver`` (when
  ``langgraph-checkpoint-sqlite`` / ``-postgres`` are installed), on the same SQLite file system and server.

Reported: µs per run (best of ``--repeats`` samples; the machine may be shared) and the checkpointing cost per
step, i.e. (durable run − plain run of the same engine) / steps. routegate's stores run twice: keeping every
checkpoint of a run (``Store(history=True)``, the default) and only the latest (``history=False``, what a store
wrote before history existed); the history's storage per step is read from the tables afterwards.

``--long N`` measures instead one durable run of ``N`` steps (a step that loops on itself) in memory, on SQLite
and on PostgreSQL, keeping every checkpoint and (``--latest-only``, too) only the latest: the run's time and its
checkpoint cost per step, its history's size, and how long ``routegate plans history`` takes to list it (the
command in a fresh process, and ``read_history`` in this one; not for memory, which no other process reads).

Run: python bench/plan_durable.py [--runs N] [--repeats R] [--steps S] [--no-postgres] [--long N [--latest-only]]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypedDict

from routegate.plan import Plan, Step, Store, when
from routegate.plan.history import read_history

_ids = itertools.count()


def _inc(n: int) -> int:
    return n + 1


def routegate_plan(steps: int, store: Store | None) -> Plan:
    return Plan(*(Step(_inc, name=f"s{i}") for i in range(steps)), store=store)


class State(TypedDict):
    n: int


def langgraph_app(steps: int, saver: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(State)
    names = [f"s{i}" for i in range(steps)]
    for name in names:
        graph.add_node(name, lambda state: {"n": state["n"] + 1})
    graph.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile(checkpointer=saver)


def best_us(fn: Callable[[], Any], runs: int, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(runs):
            fn()
        best = min(best, (time.perf_counter() - t0) / runs)
    return best * 1e6


@contextmanager
def embedded_postgres() -> Iterator[str]:
    from routegate.apps.support.db import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="routegate-bench-pg-") as base:
        server = EmbeddedPostgres(Path(base) / "data")
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


def _schema(url: str, name: str) -> str:
    """``options=`` for a connection URL that puts a run's tables in a schema of their own (created here)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
    return f"options=-csearch_path%3D{name}"


def _sqlite_bytes(db: Path) -> tuple[int, int, int]:
    """(history rows, bytes of their documents, bytes of the latest checkpoints) of a SQLite store."""
    with sqlite3.connect(db) as conn:
        rows, history = conn.execute("SELECT count(*), sum(length(state)) FROM plan_history").fetchone()
        (latest,) = conn.execute("SELECT sum(length(state)) FROM plan_runs").fetchone()
    return int(rows), int(history or 0), int(latest or 0)


def _postgres_bytes(url: str) -> tuple[int, int, int]:
    """The same for PostgreSQL, as stored (``pg_column_size`` of the jsonb documents)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*), sum(pg_column_size(state)) FROM routegate_plan_history").fetchone()
        latest = conn.execute("SELECT sum(pg_column_size(state)) FROM routegate_plan_runs").fetchone()
    assert row is not None and latest is not None
    return int(row[0]), int(row[1] or 0), int(latest[0] or 0)


storage: list[tuple[str, int, int, int]] = []


def measure(runs: int, repeats: int, steps: int, postgres: bool) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="routegate-bench-")))
        url = stack.enter_context(embedded_postgres()) if postgres else None

        def rg(label: str, store: Store | None) -> None:
            plan = routegate_plan(steps, store)
            if store is None:
                rows.append(("routegate", label, best_us(lambda: plan.run(0), runs * 10, repeats)))
                return
            stack.callback(store.close)
            rows.append(
                ("routegate", label, best_us(lambda: plan.run(0, checkpoint_key=f"k{next(_ids)}"), runs, repeats))
            )

        rg("no checkpoint", None)
        rg("memory", Store())
        rg("memory, latest only", Store(history=False))
        rg("SQLite", Store(db=tmp / "plans.sqlite"))
        rg("SQLite, latest only", Store(db=tmp / "latest.sqlite", history=False))
        if url is not None:
            rg("PostgreSQL", Store(db=url))
            rg(
                "PostgreSQL, latest only",
                Store(db=f"{url}{'&' if '?' in url else '?'}{_schema(url, 'latest')}", history=False),
            )
        storage.append(("SQLite", *_sqlite_bytes(tmp / "plans.sqlite")))
        if url is not None:
            storage.append(("PostgreSQL", *_postgres_bytes(url)))

        def lg(label: str, saver: Any, n: int) -> None:
            app = langgraph_app(steps, saver)
            if saver is None:
                rows.append(("LangGraph", label, best_us(lambda: app.invoke({"n": 0}), n, repeats)))
                return
            rows.append(
                (
                    "LangGraph",
                    label,
                    best_us(
                        lambda: app.invoke({"n": 0}, {"configurable": {"thread_id": f"t{next(_ids)}"}}), n, repeats
                    ),
                )
            )

        lg("no checkpointer", None, runs)
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            print("langgraph-checkpoint-sqlite is not installed: SqliteSaver skipped")
        else:
            conn = sqlite3.connect(tmp / "lg.sqlite", check_same_thread=False)
            stack.callback(conn.close)
            lg("SqliteSaver", SqliteSaver(conn), runs)
        if url is not None:
            try:
                from langgraph.checkpoint.postgres import PostgresSaver
            except ImportError:
                print("langgraph-checkpoint-postgres is not installed: PostgresSaver skipped")
            else:
                saver = stack.enter_context(PostgresSaver.from_conn_string(url))
                saver.setup()
                lg("PostgresSaver", saver, runs)
    return rows


def report(rows: list[tuple[str, str, float]], steps: int) -> str:
    base = {engine: us for engine, label, us in rows if label.startswith("no ")}
    lines = [
        f"| engine | checkpoints | µs per run ({steps} steps) | checkpoint cost per step (µs) |",
        "|---|---|---:|---:|",
    ]
    for engine, label, us in rows:
        extra = "—" if label.startswith("no ") else f"{(us - base[engine]) / steps:.1f}"
        lines.append(f"| {engine} | {label} | {us:.1f} | {extra} |")
    if storage:
        lines += ["", "| store | history rows | bytes per history row | bytes of the latest checkpoint, per run |"]
        lines.append("|---|---:|---:|---:|")
        for store, count, history, latest in storage:
            runs = max(count // (steps + 1), 1)  # a run of S steps writes S + 1 checkpoints
            lines.append(f"| {store} | {count} | {history / max(count, 1):.0f} | {latest / runs:.0f} |")
    return "\n".join(lines)


def looping_plan(steps: int, store: Store) -> Plan:
    """One step that runs ``steps`` times (it routes back to itself until its counter reaches ``steps``)."""
    return Plan(
        Step(_inc, name="tick", routes={"tick": when.payload(lambda n: n < steps)}),
        Step(lambda n: n, name="done"),
        store=store,
        max_iterations=steps + 2,
    )


def long_run(steps: int, postgres: bool, latest_only: bool = False) -> str:
    """One run of ``steps`` steps per store: its time, its checkpoint cost per step, its history's size, and
    listing its history."""
    lines = [
        f"| store | run of {steps} steps (s) | checkpoint cost per step (µs) | history rows | history bytes "
        "| plans history (s, command) | read_history (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    plain = looping_plan(steps, Store())
    t0 = time.perf_counter()
    assert plain.run(0).ok
    base = time.perf_counter() - t0
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="routegate-bench-long-")))
        dbs: list[tuple[str, str | None, bool]] = [("memory", None, True)]
        if latest_only:
            dbs.append(("memory, latest only", None, False))
        dbs.append(("SQLite", str(tmp / "long.sqlite"), True))
        if latest_only:
            dbs.append(("SQLite, latest only", str(tmp / "latest.sqlite"), False))
        if postgres:
            url = stack.enter_context(embedded_postgres())
            dbs.append(("PostgreSQL", url, True))
            if latest_only:
                latest = f"{url}{'&' if '?' in url else '?'}{_schema(url, 'latest')}"
                dbs.append(("PostgreSQL, latest only", latest, False))
        for label, db, history in dbs:
            store = Store(db=db, history=history)
            stack.callback(store.close)
            t0 = time.perf_counter()
            result = looping_plan(steps, store).run(0, checkpoint_key="long")
            ran = time.perf_counter() - t0
            assert result.ok and len(result.path) == steps + 1, result.stop_reason
            cost = (ran - base) / (steps + 1) * 1e6
            if not history:
                lines.append(f"| {label} | {ran:.2f} | {cost:.0f} | — | — | — | — |")
                continue
            t0 = time.perf_counter()
            listed_history = read_history(store.checkpoints, "long")
            read = time.perf_counter() - t0
            assert len(listed_history) == steps + 2
            if db is None:
                lines.append(f"| {label} | {ran:.2f} | {cost:.0f} | {steps + 2} | — | — | {read:.2f} |")
                continue
            routegate = Path(sys.executable).with_name("routegate")
            env = {k: v for k, v in os.environ.items() if not k.startswith("ROUTEGATE_")}
            t0 = time.perf_counter()
            done = subprocess.run(
                [str(routegate), "plans", "history", "long", "--db", db], capture_output=True, env=env, check=True
            )
            listed = time.perf_counter() - t0
            assert done.stdout.count(b"\n") == steps + 4
            count, size, _ = _sqlite_bytes(Path(db)) if label == "SQLite" else _postgres_bytes(db)
            lines.append(f"| {label} | {ran:.2f} | {cost:.0f} | {count} | {size:,} | {listed:.2f} | {read:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="durable runs per sample (plain routegate: 10×)")
    parser.add_argument("--repeats", type=int, default=3, help="timing samples; the best is reported (default 3)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (default 5)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL rows (no server started)")
    parser.add_argument("--long", type=int, metavar="N", help="instead: one run of N steps, and its history listed")
    parser.add_argument(
        "--latest-only", action="store_true", help="with --long: each store also with history=False (only the latest)"
    )
    args = parser.parse_args(argv)
    if args.long:
        print(long_run(args.long, not args.no_postgres, args.latest_only))
        return
    print(report(measure(args.runs, args.repeats, args.steps, not args.no_postgres), args.steps))


if __name__ == "__main__":
    main()
