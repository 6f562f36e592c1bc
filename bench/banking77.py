#!/usr/bin/env python3
"""Banking77 with held-out intents: does the router know what it does not know?

Protocol (Banking77, Casanueva et al. 2020, CC BY 4.0; ``train.csv`` / ``test.csv`` with columns ``text``,
``category``): for each seed, 10 of the 77 intents are drawn at random (``numpy.random.default_rng(seed)``) and held
out of training and validation. Of the 67 known intents' training rows, 10 % of each intent (seeded) is cut off as
validation, the rest is the training data. The router is fitted on train, calibrated and chosen on val — which has
no out-of-scope rows: everything chosen there is chosen without a single unseen intent — and measured once on test,
where the held-out intents' rows are relabelled ``oos``. Nothing is chosen on test.

Reported per split and as a mean: the OOS AUROC of the router's confidence (unseen vs known test rows), the AUROC
of each score the router computes (``SemanticRouter.score_table``, when the router has it), closed-set top-1
accuracy over the known intents' test rows, and in-scope accuracy / OOS recall at the calibrated threshold.

    .venv/bin/python bench/banking77.py --data ../shared/data/banking77 [--seeds 0 1 2 3 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinc150 import CachedEncoder  # this folder's CLINC150 bench: its encoder cache
from routegate.embed import MiniLMEncoder
from routegate.routers import LabelledExample, SemanticRouter
from routegate.routers.evaluation import score_decisions

HELD_OUT = 10
VAL_SHARE = 0.1


def read_csv(path: Path) -> list[LabelledExample]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [LabelledExample(row["text"], row["category"]) for row in csv.DictReader(handle)]


def split(
    train: Sequence[LabelledExample], test: Sequence[LabelledExample], seed: int, held_out: int = HELD_OUT
) -> tuple[list[str], list[LabelledExample], list[LabelledExample], list[LabelledExample]]:
    """The held-out intents, train and val (known intents only), and test with the held-out intents as ``oos``."""
    intents = sorted({e.label for e in train})
    rng = np.random.default_rng(seed)
    held = sorted(str(i) for i in rng.choice(intents, held_out, replace=False))
    fit: list[LabelledExample] = []
    val: list[LabelledExample] = []
    for intent in intents:
        if intent in held:
            continue
        rows = [e for e in train if e.label == intent]
        order = rng.permutation(len(rows))
        cut = max(1, round(VAL_SHARE * len(rows)))
        val += [rows[int(i)] for i in sorted(order[:cut])]
        fit += [rows[int(i)] for i in sorted(order[cut:])]
    relabelled = [LabelledExample(e.text, "oos") if e.label in held else e for e in test]
    return held, fit, val, relabelled


def auroc(confidence: np.ndarray[Any, Any], is_oos: np.ndarray[Any, Any]) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(is_oos, -confidence))


def run_split(seed: int, train: list[LabelledExample], test: list[LabelledExample], encoder: Any) -> dict[str, Any]:
    held, fit, val, relabelled = split(train, test, seed)
    started = time.perf_counter()
    router = SemanticRouter.fit(fit, val=val, encoder=encoder)
    fit_seconds = time.perf_counter() - started
    texts, labels = [e.text for e in relabelled], [e.label for e in relabelled]
    decisions = router.route_many(texts)
    report = score_decisions(decisions, labels, router.default_route)
    is_oos = np.array([label == "oos" for label in labels])
    out: dict[str, Any] = {
        "seed": seed,
        "held_out": held,
        "rows": {
            "train": len(fit),
            "val": len(val),
            "test_known": int((~is_oos).sum()),
            "test_unseen": int(is_oos.sum()),
        },
        "fit_seconds": round(fit_seconds, 1),
        "method": router.calibration.method,
        "auroc": report.oos_auroc,
        "closed_set_top1": report.top1_accuracy,
        "in_scope_accuracy": report.in_scope_accuracy,
        "oos_recall": report.oos_recall,
    }
    if hasattr(router, "score_table"):
        table = router.score_table(texts)
        out["auroc_by_score"] = {name: round(auroc(values, is_oos), 4) for name, values in table.items()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with Banking77's train.csv and test.csv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="one split per seed")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    train, test = read_csv(args.data / "train.csv"), read_csv(args.data / "test.csv")
    encoder = CachedEncoder(MiniLMEncoder(intra_op_num_threads=args.threads))
    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.python_version()}, cpus={__import__('os').cpu_count()}",
        "splits": [],
    }
    for seed in args.seeds:
        print(f"split seed {seed} ...", file=sys.stderr, flush=True)
        results["splits"].append(run_split(seed, train, test, encoder))
        row = results["splits"][-1]
        print(
            f"  AUROC {row['auroc']:.4f}  closed-set top-1 {row['closed_set_top1']:.4f}  ({row['method']})",
            file=sys.stderr,
            flush=True,
        )
    splits = results["splits"]
    results["mean"] = {
        key: float(np.mean([s[key] for s in splits])) for key in ("auroc", "closed_set_top1", "in_scope_accuracy")
    }
    if splits and "auroc_by_score" in splits[0]:
        names = splits[0]["auroc_by_score"]
        results["mean"]["auroc_by_score"] = {n: float(np.mean([s["auroc_by_score"][n] for s in splits])) for n in names}
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
