"""Durable-plan overhead: what a checkpoint after every step costs, per step, beside LangGraph's savers.

The same linear graph of ``--steps`` trivial steps (``n -> n + 1``) runs, one fresh checkpoint key / thread per
run, as:

* routegate ``Plan`` without checkpointing, and with ``checkpoint_key=`` on ``Store()`` (in memory),
  ``Store(db="….sqlite")`` and ``Store(db="postgresql://…")`` (an embedded PostgreSQL started here);
* LangGraph ``StateGraph`` without a checkpointer, with ``SqliteSaver`` and with ``PostgresSaver`` (when
  ``langgraph-checkpoint-sqlite`` / ``-postgres`` are installed), on the same SQLite file system and server.

Reported: µs per run (best of ``--repeats`` samples; the machine may be shared) and the checkpointing cost per
step, i.e. (durable run − plain run of the same engine) / steps.

Run: python bench/plan_durable.py [--runs N] [--repeats R] [--steps S] [--no-postgres]
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypedDict

from routegate.plan import Plan, Step, Store

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
        rg("SQLite", Store(db=tmp / "plans.sqlite"))
        if url is not None:
            rg("PostgreSQL", Store(db=url))

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
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="durable runs per sample (plain routegate: 10×)")
    parser.add_argument("--repeats", type=int, default=3, help="timing samples; the best is reported (default 3)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (default 5)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL rows (no server started)")
    args = parser.parse_args(argv)
    print(report(measure(args.runs, args.repeats, args.steps, not args.no_postgres), args.steps))


if __name__ == "__main__":
    main()
