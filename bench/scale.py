"""Scale-out on Ray, side by side on this machine: ``POST /chat`` req/s and p99 of ``routegate serve --ray`` with 1
and 2 replicas against plain ``routegate serve``; batch routing throughput, ``route --file`` against
``route --file --ray``, for a file the rules mostly settle and one whose every row is embedded; and where a turn's
CPU goes (the desk's process against PostgreSQL), the basis of the N-node projection in
``docs/benchmarks/scale.md``. Bounded: each load level runs ``--seconds`` (default 3); the batch files have
``--rows`` rows; the cost part runs ``--turns`` turns per message mix.

    .venv/bin/python bench/scale.py                    # every part
    .venv/bin/python bench/scale.py --part online --rounds 2
    .venv/bin/python bench/scale.py --part batch --rows 2000
    .venv/bin/python bench/scale.py --part costs

Servers are started one after the other and measured in interleaved rounds (plain, 1 replica, 2 replicas, then
again), so that a shared machine's drift spreads over all of them. Needs the ``routegate[ray]`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from routegate.server.testing import serve_process
from server_load import MIXES, cpu_probe_seconds, run_level

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]


@contextlib.contextmanager
def server(extra: list[str], data_dir: str) -> Iterator[str]:
    env = dict(os.environ, ROUTEGATE_DATA_DIR=data_dir)
    env.pop("OPENAI_API_KEY", None)
    env.pop("RAY_ADDRESS", None)
    with serve_process(*extra, env=env, start_timeout=240, stop_timeout=120) as (url, _):
        yield url


def online(rounds: int, seconds: float, concurrency: int) -> list[dict[str, object]]:
    setups = {"serve": [], "ray x1": ["--ray", "--replicas", "1"], "ray x2": ["--ray", "--replicas", "2"]}
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="routegate-scale-") as data_dir:
        for r in range(rounds):
            for name, extra in setups.items():
                with server(extra, data_dir) as url:
                    asyncio.run(run_level(url, concurrency=4, mode="json", seconds=1.0, questions=MIXES["spec"]))
                    result = asyncio.run(
                        run_level(url, concurrency=concurrency, mode="json", seconds=seconds, questions=MIXES["spec"])
                    )
                rows.append({"round": r + 1, "setup": name, **result})
                print(
                    f"round {r + 1} {name:7s} c={concurrency} {result['rps']:7.1f} req/s  p50 {result['p50_ms']:6.1f} ms"
                    f"  p99 {result['p99_ms']:6.1f} ms  errors {result['errors']:.0f}",
                    flush=True,
                )
    return rows


def batch(rows: int, rounds: int) -> list[dict[str, object]]:
    """Two files of ``rows`` rows: the labelled set's texts as they come (most settled by the rules, no encoder),
    and only those the rules leave to the embedding layer (every row embedded)."""
    base = [json.loads(line)["text"] for line in (ROOT / "tests/data/support_routes.jsonl").read_text().splitlines()]
    out: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="routegate-scale-") as tmp:
        env = dict(os.environ, ROUTEGATE_DATA_DIR=str(Path(tmp) / "data"))
        env.pop("OPENAI_API_KEY", None)
        env.pop("RAY_ADDRESS", None)
        every = Path(tmp) / "every.jsonl"
        every.write_text("".join(json.dumps({"text": text}) + "\n" for text in base))
        decided = subprocess.run([*CLI, "route", "--file", str(every)], env=env, check=True, capture_output=True)
        unsure = [
            json.loads(line)["text"] for line in decided.stdout.splitlines() if json.loads(line)["layer"] != "rules"
        ]
        files = {"labelled set": base, "embedded rows": unsure}
        for kind, texts in files.items():
            queries = Path(tmp) / "queries.jsonl"
            queries.write_text(
                "".join(json.dumps({"text": f"{texts[i % len(texts)]} ({i})"}) + "\n" for i in range(rows))
            )
            outputs: dict[str, bytes] = {}
            for r in range(rounds):
                for name, extra in {"single process": [], "ray data": ["--ray"]}.items():
                    started = time.perf_counter()
                    done = subprocess.run([*CLI, "route", "--file", str(queries), *extra], env=env, capture_output=True)
                    wall = time.perf_counter() - started
                    if done.returncode != 0:
                        raise SystemExit(done.stderr.decode()[-2000:])
                    outputs[name] = done.stdout
                    out.append(
                        {
                            "file": kind,
                            "round": r + 1,
                            "setup": name,
                            "rows": rows,
                            "seconds": wall,
                            "rows_per_s": rows / wall,
                        }
                    )
                    print(
                        f"{kind:13s} round {r + 1} {name:14s} {rows} rows in {wall:6.2f} s = {rows / wall:7.1f} rows/s",
                        flush=True,
                    )
            print(f"{kind}: outputs identical: {outputs['single process'] == outputs['ray data']}", flush=True)
    return out


async def _costs(turns: int, concurrency: int) -> list[dict[str, object]]:
    from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
    from routegate.apps.support.desk import SupportAgent
    from routegate.apps.support.semantic import FittedSemanticLayer
    from routegate.embed import MiniLMEncoder
    from session_lock import DB_DIR, clock, repeat

    out: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="routegate-scale-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg")
        url = server.start()
        DB_DIR.append(Path(tmp) / "pg")
        try:
            encoder = MiniLMEncoder(intra_op_num_threads=1)
            encoder.warm_up()
            with clock() as spent:
                for i in range(200):
                    encoder.encode([f"I cannot log in to my account ({i})"])
            print(f"MiniLM, one message, one thread: {spent['cpu'] / 200 * 1e3:.2f} ms CPU", flush=True)
            fitted = FittedSemanticLayer.load_or_fit(encoder, Path(tmp))
            async with SupportDatabase(url, max_size=4) as db:
                desk = SupportAgent(db=db, encoder=encoder, semantic=fitted)
                await desk.start()
                for mix in ("spec", "unsure"):
                    questions = MIXES[mix]

                    async def turn(i: int, mix: str = mix, questions: tuple[str, ...] = questions) -> None:
                        await desk.ask(
                            questions[i // concurrency % len(questions)], session_id=f"{mix}-{i % concurrency}"
                        )

                    await repeat(concurrency * 5, concurrency, turn)  # warm up
                    spent = await repeat(turns, concurrency, turn)
                    row = {
                        "mix": mix,
                        "turns": turns,
                        "app_cpu_ms": spent["cpu"] / turns * 1e3,
                        "db_cpu_ms": spent["db"] / turns * 1e3,
                        "turns_per_s": turns / spent["wall"],
                    }
                    out.append(row)
                    print(
                        f"{mix:7s} c={concurrency}: app {row['app_cpu_ms']:.2f} ms CPU/turn (desk, encoder, driver), "
                        f"database {row['db_cpu_ms']:.2f} ms CPU/turn, {row['turns_per_s']:.0f} turns/s",
                        flush=True,
                    )
        finally:
            server.stop()
    return out


def costs(turns: int, concurrency: int) -> list[dict[str, object]]:
    """Where a turn's CPU goes, the basis of the N-node projection: the desk's process (router, tools, encoder,
    the driver) against PostgreSQL (its backends), per turn, for the spec's messages and for messages the
    embedding layer decides. In one process (no HTTP), so that the split is the desk's own."""
    return asyncio.run(_costs(turns, concurrency))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["online", "batch", "costs", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=800, help="turns per mix in --part costs")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    print(f"cpu probe: {cpu_probe_seconds():.2f} s; cores: {os.cpu_count()}", flush=True)
    results: dict[str, object] = {}
    if args.part in ("online", "all"):
        results["online"] = online(args.rounds, args.seconds, args.concurrency)
    if args.part in ("batch", "all"):
        results["batch"] = batch(args.rows, args.rounds)
    if args.part in ("costs", "all"):
        results["costs"] = costs(args.turns, concurrency=8)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
