#!/usr/bin/env python3
"""Single-query latency of saved routers, interleaved chunk by chunk so that load from other processes hits each
alike: ``route()`` p50 / p99 per router, and the ratio to the first.

Each router runs in its own process, with its own interpreter if given (``PYTHON=DIR``): so two source trees (say
a branch and main, each with its own virtualenv) can be compared on the same queries, each running its own code.

    .venv/bin/python bench/route_latency.py --data clinc150/test.jsonl \\
        --router .venv/bin/python=/tmp/router-new --router ../main/.venv/bin/python=/tmp/router-main \\
        [--queries 1000] [--chunk 25] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def worker(router_dir: str, threads: int) -> int:
    """Route the texts of each stdin line (a JSON list) one at a time; print their latencies in ms (a JSON list)."""
    from routegate.routers import SemanticRouter
    from routegate.routers.persist import saved_encoder

    router = SemanticRouter.load(router_dir, encoder=saved_encoder(router_dir, intra_op_num_threads=threads))
    router.route("warm up the encoder")
    for line in sys.stdin:
        out = []
        for text in json.loads(line):
            started = time.perf_counter()
            router.route(text)
            out.append((time.perf_counter() - started) * 1000)
        print(json.dumps(out), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="JSONL with a text per line")
    parser.add_argument("--router", action="append", default=[], help="[PYTHON=]DIR of a saved router (repeat)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=25, help="queries per turn of each router")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads of each router")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.threads)
    texts = [json.loads(line)["text"] for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = texts[: args.queries]
    procs = []
    for spec in args.router:
        python, _, directory = spec.rpartition("=")
        command = [python or sys.executable, __file__, "--worker", directory, "--threads", str(args.threads)]
        procs.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    latencies: list[list[float]] = [[] for _ in procs]
    for start in range(0, len(texts), args.chunk):
        chunk = json.dumps(texts[start : start + args.chunk])
        for proc, out in zip(procs, latencies, strict=True):
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(chunk + "\n")
            proc.stdin.flush()
            out += json.loads(proc.stdout.readline())
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    first = float(np.percentile(latencies[0], 50))
    for spec, values in zip(args.router, latencies, strict=True):
        p50, p99 = float(np.percentile(values, 50)), float(np.percentile(values, 99))
        print(f"{spec}: p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({p50 / first:.2f}x the first)  n={len(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
