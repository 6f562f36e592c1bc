"""Scale-out on Ray, side by side on this machine: ``POST /chat`` req/s and p99 of ``routegate serve --ray`` with 1
and 2 replicas against plain ``routegate serve``; and batch routing throughput, ``route --file`` against
``route --file --ray``. Bounded: each load level runs ``--seconds`` (default 3); the batch file has ``--rows`` rows.

    .venv/bin/python bench/scale.py                    # both parts
    .venv/bin/python bench/scale.py --part online --rounds 2
    .venv/bin/python bench/scale.py --part batch --rows 2000

Servers are started one after the other and measured in interleaved rounds (plain, 1 replica, 2 replicas, then
again), so that a shared machine's drift spreads over all of them. Needs the ``routegate[ray]`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from routegate.server.testing import free_port, wait_until_serving
from server_load import MIXES, cpu_probe_seconds, run_level

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]


@contextlib.contextmanager
def server(extra: list[str], data_dir: str) -> Iterator[str]:
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=data_dir)
    env.pop("OPENAI_API_KEY", None)
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{url}/healthz", proc, timeout=240)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


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
    base = [json.loads(line)["text"] for line in (ROOT / "tests/data/support_routes.jsonl").read_text().splitlines()]
    out: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="routegate-scale-") as tmp:
        queries = Path(tmp) / "queries.jsonl"
        lines = [json.dumps({"text": f"{base[i % len(base)]} ({i})"}) for i in range(rows)]
        queries.write_text("\n".join(lines) + "\n")
        env = dict(os.environ, ROUTEGATE_DATA_DIR=str(Path(tmp) / "data"))
        env.pop("OPENAI_API_KEY", None)
        env.pop("RAY_ADDRESS", None)
        subprocess.run([*CLI, "route", "warm up the cache"], env=env, check=True, capture_output=True)
        outputs: dict[str, bytes] = {}
        for r in range(rounds):
            for name, extra in {"single process": [], "ray data": ["--ray"]}.items():
                started = time.perf_counter()
                done = subprocess.run([*CLI, "route", "--file", str(queries), *extra], env=env, capture_output=True)
                wall = time.perf_counter() - started
                if done.returncode != 0:
                    raise SystemExit(done.stderr.decode()[-2000:])
                outputs[name] = done.stdout
                out.append({"round": r + 1, "setup": name, "rows": rows, "seconds": wall, "rows_per_s": rows / wall})
                print(f"round {r + 1} {name:14s} {rows} rows in {wall:6.2f} s = {rows / wall:7.1f} rows/s", flush=True)
        print(f"outputs identical: {outputs['single process'] == outputs['ray data']}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["online", "batch", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    print(f"cpu probe: {cpu_probe_seconds():.2f} s; cores: {os.cpu_count()}", flush=True)
    results: dict[str, object] = {}
    if args.part in ("online", "both"):
        results["online"] = online(args.rounds, args.seconds, args.concurrency)
    if args.part in ("batch", "both"):
        results["batch"] = batch(args.rows, args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
