#!/usr/bin/env python3
"""CLINC150 (Full): routegate's SemanticRouter side by side with semantic-router, same MiniLM encoder — and, with
``--finetune``, routegate on its own fine-tuned encoder.

Protocol: fit on train, tune (calibrate) on val, report on test — test is never used to choose anything.

* routegate: ``SemanticRouter.fit(train, val=val)`` (learned head, OOS threshold calibrated on val for an OOS
  recall floor); the whole trade-off curve comes from recalibrating the same head on val for several floors.
* routegate fine-tuned (``--finetune``): ``fit_finetuned(train, val=val)`` — what ``routegate fit --finetune``
  runs: the encoder fine-tuned on train, objective / epochs / learning rate chosen on val, exported to int8 ONNX,
  the router fitted and calibrated on it; curve and val-chosen point as for the frozen encoder. Which of the two
  encoders the val figures prefer is reported too.
* semantic-router (PyPI ``semantic-router``): ``IndexedRouter`` with the 100 train utterances of each intent,
  ``fit`` (its Platt calibration) on val, then its confidence threshold chosen on val with the same objective
  (its own default, no threshold, never says out-of-scope).

Both use routegate's MiniLM int8 encoder (semantic-router through a ``DenseEncoder`` wrapper). Accuracy is computed
with batched encoding (through a cache shared by both); latency is single-query calls without the cache.

    .venv/bin/python bench/clinc150.py --data ../shared/data/clinc150 [--latency-queries 300] [--skip-peer] \
        [--finetune [--max-minutes 45] [--finetune-epochs 2] [--finetune-out DIR]] [--encoder-model FILE.onnx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from routegate.embed import MiniLMEncoder
from routegate.embed.protocol import Encoder, Vectors
from routegate.embed.wrapper import EncoderWrapper
from routegate.routers import FitConfig, LabelledExample, SemanticRouter
from routegate.routers.calibration import fit_threshold
from routegate.routers.data import load_examples
from routegate.routers.evaluation import score_decisions

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "clinc150"
FLOORS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


class CachedEncoder(EncoderWrapper):
    """Memoises vectors by text: the accuracy passes of both routers embed each text once."""

    def __init__(self, inner: Encoder) -> None:
        super().__init__(inner)
        self.cache: dict[str, np.ndarray[Any, Any]] = {}

    def encode(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.inner.encode(missing), strict=True):
                self.cache[text] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def metrics(pred: Sequence[str | None], labels: Sequence[str]) -> dict[str, float]:
    y = np.array(labels, dtype=object)
    p = np.array(["oos" if x is None else x for x in pred], dtype=object)
    ins = y != "oos"
    said = p == "oos"
    return {
        "in_scope_accuracy": float((p[ins] == y[ins]).mean()),
        "oos_recall": float(said[~ins].mean()),
        "oos_precision": float((said & ~ins).sum() / max(1, said.sum())),
    }


def run_routegate(
    train: list[LabelledExample],
    val: list[LabelledExample],
    test: list[LabelledExample],
    encoder: MiniLMEncoder,
    cached: CachedEncoder,
) -> tuple[dict[str, Any], Callable[[str], Any]]:
    print("routegate: fit on train, calibrate on val ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    router = SemanticRouter.fit(train, val=val, encoder=encoder)  # the real, uncached fit time
    return measure_router(router, time.perf_counter() - started, val, test, cached), router.route


def measure_router(
    router: SemanticRouter, fit_seconds: float, val: list[LabelledExample], test: list[LabelledExample], cached: Encoder
) -> dict[str, Any]:
    """The val-chosen point on test (batched through ``cached``) and the curve: the same head recalibrated on val
    for each floor, reported on test."""
    cal = router.calibration
    fast = router.with_encoder(cached)
    texts, labels = [e.text for e in test], [e.label for e in test]
    decisions = fast.route_many(texts)
    report = score_decisions(decisions, labels, router.default_route)
    curve = []
    for floor in FLOORS:
        again = fast.recalibrate(val, config=FitConfig(oos_recall_floor=floor))
        m = metrics([d.route for d in again.route_many(texts)], labels)
        curve.append(
            {
                "val_oos_recall_floor": floor,
                "alpha": again.calibration.alpha,
                "beta": again.calibration.beta,
                "method": again.calibration.method,
                "val_in_scope_accuracy": again.calibration.in_scope_accuracy,
                **{f"test_{k}": v for k, v in m.items()},
            }
        )
    is_oos = np.array([label == "oos" for label in labels])
    by_score = {
        name: float(roc_auc_score(is_oos, -values)) for name, values in fast.score_table(texts).items()
    }  # each score's separation on test: read, never used to choose
    return {
        "fit_seconds": fit_seconds,
        "calibration": {k: v for k, v in cal.to_dict().items() if k != "grid"},
        "test": {
            "in_scope_accuracy": report.in_scope_accuracy,
            "oos_recall": report.oos_recall,
            "oos_precision": report.oos_precision,
            "oos_f1": report.oos_f1,
            "oos_auroc": report.oos_auroc,
            "auroc_by_score": by_score,
            "cascade": report.cascade.to_dict() if report.cascade else None,
        },
        "closed_set_accuracy": float(
            np.mean([d.top == label for d, label in zip(decisions, labels, strict=True) if label != "oos"])
        ),
        "curve": curve,
    }


def run_finetuned(
    train: list[LabelledExample], val: list[LabelledExample], test: list[LabelledExample], args: argparse.Namespace
) -> tuple[dict[str, Any], Callable[[str], Any]]:
    from routegate.routers.finetune import FinetuneConfig, fit_finetuned

    print("routegate fine-tuned: the sweep on train, chosen on val ...", file=sys.stderr, flush=True)
    config = FinetuneConfig(
        epochs=args.finetune_epochs,
        baseline=False,  # the frozen encoder is measured beside it (run_routegate); which wins on val is reported
        max_minutes=args.max_minutes,
        threads=args.threads,
    )
    result = fit_finetuned(train, val=val, finetune=config, progress=sys.stderr)
    router = result.router
    if args.finetune_out:
        router.save(args.finetune_out)
    cached = CachedEncoder(router.encoder)
    out = measure_router(router, result.seconds, val, test, cached)
    out["sweep"] = [c.to_dict() for c in result.candidates]
    out["chosen"] = result.chosen
    out["stopped_by_budget"] = result.stopped_by_budget
    out["skipped"] = list(result.skipped)
    return out, router.route


def run_semantic_router(
    train: list[LabelledExample],
    val: list[LabelledExample],
    test: list[LabelledExample],
    encoder: MiniLMEncoder,
    cached: CachedEncoder,
) -> tuple[dict[str, Any], Callable[[str], Any]]:
    from semantic_router import IndexedRouter, Route
    from semantic_router.encoders import DenseEncoder

    class RoutegateMiniLM(DenseEncoder):  # type: ignore[misc]  # pydantic model from an untyped package
        """semantic-router's encoder interface over a routegate encoder."""

        name: str = "routegate-minilm-int8"
        inner: Any = None

        def __call__(self, docs: list[Any]) -> list[list[float]]:
            return [list(map(float, v)) for v in self.inner.encode([str(d) for d in docs])]

    by_route: dict[str, list[str]] = {}
    for e in train:
        if e.label != "oos":
            by_route.setdefault(e.label, []).append(e.text)
    routes = [Route(name=name, utterances=utts[:100]) for name, utts in by_route.items()]
    print("semantic-router: index train utterances, fit on val ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    router = IndexedRouter(encoder=RoutegateMiniLM(inner=cached), routes=routes)
    router.fit([e.text for e in val], [None if e.label == "oos" else e.label for e in val])
    fit_seconds = time.perf_counter() - started

    def confidences(examples: list[LabelledExample]) -> tuple[list[str], np.ndarray[Any, Any]]:
        # the batched scoring path its own fit/evaluate use; ranking by raw score, confidence calibrated
        scored = asyncio.run(router._scores_many([e.text for e in examples]))
        tops, confs = [], []
        for s in scored:
            top = max(s, key=s.__getitem__)
            tops.append(top)
            confs.append(router._probs(s)[top])
        return tops, np.asarray(confs, dtype=np.float64)

    val_top, val_conf = confidences(val)
    val_labels = np.array([e.label for e in val], dtype=object)
    test_top, test_conf = confidences(test)
    test_labels = [e.label for e in test]
    curve = []
    chosen: dict[str, Any] = {}
    for floor in FLOORS:
        fit = fit_threshold(
            val_conf,
            np.array(val_top, dtype=object) == val_labels,
            val_labels == "oos",
            oos_recall_floor=floor,
        )
        pred = [t if c >= fit.threshold else None for t, c in zip(test_top, test_conf, strict=True)]
        m = metrics(pred, test_labels)
        curve.append(
            {"val_oos_recall_floor": floor, "threshold": fit.threshold, **{f"test_{k}": v for k, v in m.items()}}
        )
        if floor == FitConfig().oos_recall_floor:
            chosen = {"threshold": fit.threshold, **m}
    no_threshold = metrics(test_top, test_labels)
    # latency: single public calls, the real encoder
    router.encoder = RoutegateMiniLM(inner=encoder)
    router.confidence_threshold = chosen.get("threshold")
    return {
        "fit_seconds": fit_seconds,
        "test": chosen,
        "test_no_threshold": no_threshold,
        "curve": curve,
    }, router


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with train/val/test.jsonl")
    parser.add_argument("--latency-queries", type=int, default=300, help="single-query calls timed per router")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    parser.add_argument("--skip-peer", action="store_true", help="routegate only")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file (after each stage)")
    parser.add_argument("--finetune", action="store_true", help="also fit routegate on a fine-tuned encoder")
    parser.add_argument("--finetune-epochs", type=int, default=2, help="epochs of each fine-tune run (each measured)")
    parser.add_argument("--max-minutes", type=float, default=None, help="budget of the fine-tune sweep")
    parser.add_argument("--finetune-out", type=Path, help="save the fine-tuned router to this directory")
    parser.add_argument(
        "--encoder-model",
        type=Path,
        help="run this ONNX encoder instead of the shipped MiniLM (e.g. the encoder.onnx a `routegate fit "
        "--finetune` router holds): the router is fitted and measured on its vectors",
    )
    args = parser.parse_args(argv)
    train, val, test = (load_examples(args.data / f"{split}.jsonl") for split in ("train", "val", "test"))
    encoder = MiniLMEncoder(intra_op_num_threads=args.threads, model_path=args.encoder_model)
    encoder.warm_up()
    cached = CachedEncoder(encoder)
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.python_version()}, cpus={__import__('os').cpu_count()}",
        "data": {"train": len(train), "val": len(val), "test": len(test)},
    }
    calls: dict[str, Callable[[str], Any]] = {}

    def stage_done() -> None:
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))

    results["routegate"], calls["routegate"] = run_routegate(train, val, test, encoder, cached)
    stage_done()
    if not args.skip_peer:
        results["semantic_router"], calls["semantic_router"] = run_semantic_router(train, val, test, encoder, cached)
        stage_done()
    if args.finetune:
        results["routegate_finetuned"], calls["routegate_finetuned"] = run_finetuned(train, val, test, args)
        frozen, tuned = results["routegate"]["calibration"], results["routegate_finetuned"]["calibration"]
        key = lambda c: (c["feasible"], c["in_scope_accuracy"] or 0.0, c["oos_recall"] or 0.0)  # noqa: E731
        results["val_prefers"] = "routegate_finetuned" if key(tuned) > key(frozen) else "routegate"
        stage_done()
    # latency: single public calls with the real (uncached) encoder, the routers interleaved query by query so
    # that load from other processes hits both alike
    queries = [e.text for e in test[: args.latency_queries]]
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call(queries[0])  # warm up
    for query in queries:
        for name, call in calls.items():
            t0 = time.perf_counter()
            call(query)
            latencies[name].append((time.perf_counter() - t0) * 1000)
    for name, values in latencies.items():
        results[name]["latency_ms_p50"] = pct(values, 50)
        results[name]["latency_ms_p99"] = pct(values, 99)
    print(json.dumps(results, indent=2))
    ours = results["routegate"]
    print(
        f"\nroutegate        in-scope {ours['test']['in_scope_accuracy']:.4f}  OOS recall {ours['test']['oos_recall']:.4f}"
        f"  p50 {ours['latency_ms_p50']:.2f} ms  fit {ours['fit_seconds']:.1f} s",
        file=sys.stderr,
    )
    if "routegate_finetuned" in results:
        tuned = results["routegate_finetuned"]
        print(
            f"routegate tuned  in-scope {tuned['test']['in_scope_accuracy']:.4f}  OOS recall "
            f"{tuned['test']['oos_recall']:.4f}  p50 {tuned['latency_ms_p50']:.2f} ms  fit {tuned['fit_seconds']:.1f} s"
            f"  (val prefers {results['val_prefers']})",
            file=sys.stderr,
        )
    if "semantic_router" in results:
        peer = results["semantic_router"]
        print(
            f"semantic-router  in-scope {peer['test']['in_scope_accuracy']:.4f}  OOS recall "
            f"{peer['test']['oos_recall']:.4f}  p50 {peer['latency_ms_p50']:.2f} ms  fit {peer['fit_seconds']:.1f} s"
            f"\nratio p50 (semantic-router / routegate): "
            f"{peer['latency_ms_p50'] / statistics.fmean([ours['latency_ms_p50']]):.1f}x",
            file=sys.stderr,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
