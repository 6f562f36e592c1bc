"""``routegate fit`` and ``routegate eval``: fit, calibrate and save a semantic router; evaluate a saved one.

Everything that can be checked before the long part is: ``fit`` checks that ``-o`` is a writable directory before
fitting, ``eval`` that the ``--plot`` directory exists before evaluating; ``eval`` prints its report before writing
the plot, so a failed plot never loses the report. Errors are one ``error:`` line from :func:`routegate.cli.main`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from routegate.errors import ConfigurationError


def register(subparsers: Any) -> None:
    fit: argparse.ArgumentParser = subparsers.add_parser(
        "fit",
        help="fit and calibrate a semantic router from labelled JSONL and save it",
        description='Fit a semantic router on --train (JSONL lines {"text": ..., "label": ...}; the label "oos" '
        "marks a query no route fits), calibrate its out-of-scope threshold (and clarify margin) on --val, and "
        "save it to the directory -o. Without --val, calibration uses cross-validation on --train. The data needs "
        "at least 2 labels (2 routes, or 1 route plus out-of-scope rows) and at least 2 examples per route.",
    )
    fit.add_argument("--train", required=True, help="training data (JSONL)")
    fit.add_argument("--val", help="validation data for calibration (JSONL); never pass the test split")
    fit.add_argument(
        "--misroutes", help="a misroute log (MisrouteLog JSONL): its labelled misroutes are added to the training data"
    )
    fit.add_argument("-o", "--output", required=True, help="directory to write the router to")
    fit.add_argument("--default-route", default="oos", help="route for out-of-scope queries (default: oos)")
    fit.add_argument("--oos-label", default="oos", help="label that marks out-of-scope rows (default: oos)")
    fit.add_argument(
        "--oos-recall-floor", type=float, default=0.85, help="objective: max in-scope accuracy at this OOS recall"
    )
    fit.add_argument(
        "--inscope-coverage", type=float, default=0.97, help="objective when no OOS rows: keep this share in scope"
    )
    fit.add_argument(
        "--clarify-cost", type=float, default=None, help="enable clarify: cost of a question relative to an error"
    )
    fit.add_argument("--no-char-ngrams", action="store_true", help="embedding head only (no char n-gram model)")
    fit.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: all cores)")
    fit.set_defaults(handler=run_fit)

    ev: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="evaluate a saved router on labelled JSONL (accuracy, OOS detection, latency, curves)",
        description="Route every line of DATA one query at a time with a saved router and report in-scope "
        "accuracy, out-of-scope precision/recall/F1, per-route precision/recall, confusion, latency p50/p99 and "
        "the risk-coverage curve. A progress bar goes to stderr. Every label of DATA must be a route of the router "
        "or the out-of-scope label: unknown labels are refused (listed), unless --unknown-as-oos.",
    )
    ev.add_argument("data", help="labelled JSONL to evaluate on")
    ev.add_argument("--router", required=True, help="directory of a router saved by `routegate fit`")
    ev.add_argument("--oos-label", default="oos", help="label that marks out-of-scope rows (default: oos)")
    ev.add_argument(
        "--unknown-as-oos",
        action="store_true",
        help="score rows whose label the router does not know as out of scope (counted in the report)",
    )
    ev.add_argument("--json", action="store_true", help="print the full report as JSON on stdout")
    ev.add_argument("--plot", help="write the risk-coverage and OOS trade-off curves to this PNG")
    ev.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: all cores)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.set_defaults(handler=run_eval)


def writable_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and check a file can be written in it; :class:`ConfigurationError` otherwise."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"the output {out} exists and is not a directory; choose a directory path")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write to the output directory {out}: {exc.strerror or exc}; choose a writable place"
        ) from exc
    return out


def _check_plot_path(path: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise ConfigurationError(f"cannot write the plot to {path}: {parent} is not a directory; create it first")
    if not os.access(parent, os.W_OK):
        raise ConfigurationError(f"cannot write the plot to {path}: {parent} is not writable")


def run_fit(args: argparse.Namespace) -> int:
    from routegate.embed import MiniLMEncoder
    from routegate.routers import FitConfig, MisrouteLog, SemanticRouter, load_examples

    config = FitConfig(
        oos_recall_floor=args.oos_recall_floor,
        inscope_coverage=args.inscope_coverage,
        clarify_cost=args.clarify_cost,
        char_ngrams=False if args.no_char_ngrams else "auto",
    )
    train = load_examples(args.train)
    if args.misroutes:
        extra = MisrouteLog(args.misroutes).examples()
        print(f"adding {len(extra)} labelled misroute(s) from {args.misroutes}", file=sys.stderr)
        train += extra
    val = load_examples(args.val) if args.val else None
    output = writable_dir(args.output)  # before fitting, not after
    started = time.perf_counter()
    print(f"fitting on {len(train)} examples ...", file=sys.stderr)
    router = SemanticRouter.fit(
        train,
        val=val,
        encoder=MiniLMEncoder(intra_op_num_threads=args.threads),
        default_route=args.default_route,
        oos_label=args.oos_label,
        config=config,
    )
    path = router.save(output)
    cal = router.calibration
    summary = {
        "router": str(path),
        "routes": len(router.routes),
        "fit_seconds": round(time.perf_counter() - started, 2),
        "calibration": {k: v for k, v in cal.to_dict().items() if k != "grid"},
    }
    print(json.dumps(summary, indent=2))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from routegate.embed import MiniLMEncoder
    from routegate.routers import SemanticRouter, evaluate, load_examples, plot_report
    from routegate.routers.evaluation import progress_bar

    if args.plot:
        _check_plot_path(args.plot)
    router = SemanticRouter.load(args.router, encoder=MiniLMEncoder(intra_op_num_threads=args.threads))
    data = load_examples(args.data)
    progress = None if args.no_progress else progress_bar(sys.stderr)
    report = evaluate(
        router,
        data,
        oos_label=args.oos_label,
        progress=progress,
        unknown_labels="oos" if args.unknown_as_oos else "refuse",
    )
    # the report first: a plot that cannot be written must not lose it
    if args.json:
        print(json.dumps(report.to_dict(), indent=2), flush=True)
    else:
        print(report.summary(), flush=True)
    if args.plot:
        plot_report(report, args.plot, title=f"{args.router} on {args.data}")
    return 0
