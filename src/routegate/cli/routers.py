"""``routegate fit`` and ``routegate eval``: fit, calibrate and save a semantic router; evaluate a saved one.

Everything that can be checked before the long part is: ``fit`` checks that ``-o`` can be written before
fitting, and writes the router into a directory beside it that is renamed into place at the end (a refused or
interrupted fit leaves nothing behind); ``eval`` checks that the ``--plot`` directory exists before evaluating,
and prints its report before writing the plot, so a failed plot never loses the report. Errors are one ``error:`` line from :func:`routegate.cli.main`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from routegate._extras import needs, require
from routegate.cli._command import add_command
from routegate.cli._fit_report import fit_lines
from routegate.cli.desk import LABELLED_HELP
from routegate.errors import ConfigurationError

SCORE_NAMES = ("p_top+beta*knn", "mahalanobis", "relative_mahalanobis", "energy")
"""The scores ``--scores`` names (``routegate.routers._rule.SCORES``; listed here so that ``--help`` needs no numpy)."""

if TYPE_CHECKING:
    from routegate.apps.configured.config import DeskConfig
    from routegate.routers.data import LabelledExample


ENCODERS = ("minilm", "openai", "multilingual-e5")
"""``fit --encoder``'s names: routegate.embed.choice.ENCODER_NAMES (not imported here: the parser of every command
is built without the embed extra)."""


def register(subparsers: Any) -> None:
    fit = add_command(subparsers, "fit", run_fit)
    data = fit.add_mutually_exclusive_group(required=True)
    data.add_argument("--train", help="training data (JSONL)")
    data.add_argument(
        "--desk",
        type=Path,
        metavar="DIR",
        help="fit a desk's router on the examples of its desk.toml (generated and hand-edited), save it in DIR/router "
        "(or -o) and set [router] fitted in DIR/desk.toml, so the desk routes with it",
    )
    fit.add_argument(
        "--val",
        help="validation data for calibration (JSONL); never pass the test split. With --desk: labelled questions, "
        + LABELLED_HELP,
    )
    fit.add_argument(
        "--misroutes", help="a misroute log (MisrouteLog JSONL): its labelled misroutes are added to the training data"
    )
    fit.add_argument("-o", "--output", help="directory to write the router to (with --desk: default DIR/router)")
    fit.add_argument(
        "--default-route", default="oos", help="route for out-of-scope queries (default: oos; with --desk: LLM)"
    )
    fit.add_argument("--oos-label", default="oos", help="label that marks out-of-scope rows (default: oos)")
    fit.add_argument(
        "--oos-recall-floor",
        type=float,
        default=None,
        help="objective with out-of-scope rows in --train/--val: max in-scope accuracy at this OOS recall "
        "(default 0.85)",
    )
    fit.add_argument(
        "--inscope-coverage",
        type=float,
        default=None,
        help="objective without out-of-scope rows: keep this share of in-scope queries routed (default 0.97)",
    )
    fit.add_argument(
        "--clarify-cost", type=float, default=None, help="enable clarify: cost of a question relative to an error"
    )
    fit.add_argument("--no-char-ngrams", action="store_true", help="embedding head only (no char n-gram model)")
    fit.add_argument(
        "--encoder",
        choices=ENCODERS,
        default=None,
        help="the encoder to fit with (default: with --desk, its [router] encoder; else minilm, the embedded English "
        "MiniLM): openai = any OpenAI-compatible embeddings endpoint (ROUTEGATE_EMBEDDINGS_MODEL, _BASE_URL, "
        "_API_KEY); multilingual-e5 = the offline multilingual encoder (the routegate[multilingual] extra). The "
        "router records it; eval uses the same",
    )
    fit.add_argument(
        "--scores",
        default=",".join(SCORE_NAMES),
        help="the out-of-scope scores calibration may choose between, comma-separated (default: all): "
        "p_top+beta*knn (top probability plus the similarity to that route's nearest examples), mahalanobis "
        "(distance to the nearest route's mean under a covariance shared by all routes: strong when the encoder "
        "keeps each route compact, e.g. fine-tuned), relative_mahalanobis (the same less the distance to the mean of all "
        "training examples), energy (log-sum-exp of the embedding model's logits). The one "
        "with the best in-scope accuracy at the OOS-recall floor on --val wins; with enough out-of-scope rows an "
        "OOS detector over all of them competes too. Without out-of-scope rows only p_top+beta*knn is chosen (the "
        "coverage objective cannot measure detection). `routegate eval` reports each score's AUROC",
    )
    fit.add_argument(
        "--threads",
        type=int,
        default=None,
        help="onnxruntime intra-op threads (default: all cores; fit encodes in batches)",
    )
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")
    fit.add_argument(
        "--json", action="store_true", help="print the summary as one JSON object (every calibration figure)"
    )
    tune = fit.add_argument_group(
        "fine-tuning (the routegate[train] extra)",
        "--finetune fine-tunes the encoder on the routes of --train, chooses objective, epochs and learning rate on "
        "--val (each candidate measured as the router it would make; the encoder as shipped is a candidate too), "
        "and saves the chosen int8 ONNX encoder inside the router directory: routing it needs onnxruntime only.",
    )
    tune.add_argument("--finetune", action="store_true", help="fine-tune the encoder (needs --val)")
    tune.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="time budget of the fine-tune sweep: training stops early enough to measure what it has, and no run "
        "starts that cannot be measured in time (default: none)",
    )
    tune.add_argument(
        "--finetune-objectives",
        default="contrastive,cross-entropy",
        help="objectives to try, comma-separated: contrastive (pairs of a route's examples, in-batch negatives), "
        "cross-entropy (a classifier over the routes), supcon (the classifier plus a supervised contrastive loss "
        "that keeps each route's examples compact, what the mahalanobis score rewards; opt-in: on CLINC150 one epoch "
        "of it scored below contrastive on val, see docs/benchmarks/routers.md). Each is kept only if it wins on "
        "--val (default: contrastive,cross-entropy)",
    )
    tune.add_argument(
        "--finetune-epochs", type=int, default=2, help="epochs of each run, each one measured (default 2)"
    )
    tune.add_argument("--finetune-lr", default="5e-5", help="learning rates to try, comma-separated (default 5e-5)")

    ev = add_command(subparsers, "eval", run_eval)
    ev.add_argument(
        "data",
        metavar="FILE",
        help='labelled JSONL to evaluate on. With --router: one {"text": ..., "label": <a route of the router or '
        "the out-of-scope label>} per line. With --desk: " + LABELLED_HELP,
    )
    which = ev.add_mutually_exclusive_group(required=True)
    which.add_argument("--router", help="directory of a router saved by `routegate fit`")
    which.add_argument(
        "--desk",
        type=Path,
        metavar="DIR",
        help="a desk directory (desk init wrote it): measure its router's offline stages (rules, embedding layer) "
        "on FILE's questions; accuracy, per route, every misroute with the layer that decided",
    )
    ev.add_argument("--oos-label", default="oos", help="label that marks out-of-scope rows (default: oos)")
    ev.add_argument(
        "--unknown-as-oos",
        action="store_true",
        help="score rows whose label the router does not know as out of scope (counted in the report)",
    )
    ev.add_argument("--json", action="store_true", help="print the full report as JSON on stdout")
    ev.add_argument("--plot", help="write the risk-coverage and OOS trade-off curves to this PNG")
    ev.add_argument(
        "--threads",
        type=int,
        default=1,
        help="onnxruntime intra-op threads (default 1: eval routes one query at a time, and one thread gave the "
        "lowest single-query latency on a busy 2-core machine)",
    )
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_ray_options(ev)


def _settings() -> Any:
    from routegate.settings import Settings

    return Settings()


def _fitted_encoder(router: str, threads: int | None) -> Any:
    """The encoder of the router saved at ``router``: an embeddings endpoint's from ``ROUTEGATE_EMBEDDINGS_*``
    (loading refuses it if its model or dimension differ from the router's), else the one the router names."""
    from routegate.routers.persist import encoder_identity, saved_encoder

    if encoder_identity(router)["name"] == "openai":
        from routegate.embed.choice import encoder_named

        return encoder_named("openai", settings=_settings())
    return saved_encoder(router, intra_op_num_threads=threads)


def add_ray_options(parser: argparse.ArgumentParser) -> None:
    """``--ray`` and ``--ray-actors`` (batch work on Ray Data; needs the ``routegate[ray]`` extra)."""
    parser.add_argument(
        "--ray",
        action="store_true",
        help="split the work over Ray actors with Ray Data (the routegate[ray] extra): a local Ray cluster, or the "
        "one RAY_ADDRESS names; the output is the single-process run's, in input order",
    )
    parser.add_argument(
        "--ray-actors",
        type=int,
        default=None,
        help="with --ray: actors, each loading the model once (default: one per CPU)",
    )


@contextlib.contextmanager
def staged_output(path: str | Path) -> Iterator[Path]:
    """A new directory beside ``path`` to write the router into, checked writable before the long part; when the
    block ends normally its files are renamed into ``path`` (the directory itself when ``path`` does not exist yet),
    otherwise (the data refused, an error, Ctrl-C) it is removed, with any parent it had to create: a fit leaves
    a whole router or nothing."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"the output {out} exists and is not a directory; choose a directory path")
    parent = out.absolute().parent
    created = next((p for p in reversed([parent, *parent.parents]) if not p.exists()), None)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = parent / f".{out.name}.{uuid.uuid4().hex[:8]}.partial"
        stage.mkdir()  # not mkdtemp: the router's directory gets the usual permissions (umask), not 0700
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write to the output directory {out}: {exc.strerror or exc}; choose a writable place"
        ) from exc
    try:
        yield stage
        if out.exists():
            for item in stage.iterdir():
                os.replace(item, out / item.name)
            stage.rmdir()
        else:
            stage.rename(out)
    except BaseException:
        shutil.rmtree(created or stage, ignore_errors=True)
        raise


def _check_plot_path(path: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise ConfigurationError(f"cannot write the plot to {path}: {parent} is not a directory; create it first")
    if not os.access(parent, os.W_OK):
        raise ConfigurationError(f"cannot write the plot to {path}: {parent} is not writable")


def objective_warnings(args: argparse.Namespace, n_oos: int, config: Any) -> list[str]:
    """What the fit options cannot do with this data, said before the fit starts."""
    label = args.oos_label
    out = []
    if n_oos == 0 and args.oos_recall_floor is not None:
        out.append(
            f"--oos-recall-floor cannot apply: --train/--val hold no {label!r} rows, so the threshold keeps "
            f"--inscope-coverage={config.inscope_coverage} of in-scope queries routed instead; add out-of-scope "
            f"examples labelled {label!r} to calibrate on OOS recall"
        )
    if n_oos and args.inscope_coverage is not None:
        out.append(
            f"--inscope-coverage does not apply: with {n_oos} {label!r} rows the objective is the OOS recall floor "
            f"(--oos-recall-floor={config.oos_recall_floor})"
        )
    if 0 < n_oos < config.detector_min_examples:
        out.append(
            f"only {n_oos} {label!r} rows: the out-of-scope detector needs {config.detector_min_examples}, so the "
            "confidence threshold alone will detect out-of-scope queries"
        )
    return out


def describe_objective(objective: str, target: float, n_oos: int, label: str) -> str:
    if objective == "oos_recall_floor":
        return f"max in-scope accuracy with OOS recall >= {target:g} ({n_oos} {label!r} rows to calibrate on)"
    return f"keep {target:g} of in-scope queries routed (no {label!r} rows to calibrate an OOS recall on)"


class ProgressEncoder:
    """An encoder that shows a progress bar while it embeds a large batch (the long part of a fit)."""

    def __init__(self, inner: Any, stream: TextIO, *, chunk: int = 256) -> None:
        self.inner = inner
        self.stream = stream
        self.chunk = chunk

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def encode(self, texts: Sequence[str]) -> Any:
        with needs("embed"):
            import numpy as np

        from routegate.routers.evaluation import progress_bar

        if len(texts) <= self.chunk:
            return self.inner.encode(texts)
        update = progress_bar(self.stream, label="encoding")
        parts = []
        for start in range(0, len(texts), self.chunk):
            parts.append(self.inner.encode(texts[start : start + self.chunk]))
            update(min(start + self.chunk, len(texts)), len(texts))
        return np.concatenate(parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def score_names(value: str) -> tuple[str, ...]:
    """``--scores``: known names only; ``p_top+beta*knn`` is always a candidate (the fallback of every router)."""
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in SCORE_NAMES]
    if unknown:
        raise ConfigurationError(
            f"--scores: unknown score(s) {', '.join(unknown)}; choose among {', '.join(SCORE_NAMES)}"
        )
    return (SCORE_NAMES[0], *(n for n in names if n != SCORE_NAMES[0]))


def finetune_config(args: argparse.Namespace) -> Any:
    """The fine-tune sweep the flags ask for; misuse is refused before anything loads or trains."""
    from routegate.routers.finetune import FinetuneConfig
    from routegate.routers.finetune._sweep import require_train_extra

    require_train_extra()  # the missing extra is named before the long part
    if not args.val:
        raise ConfigurationError(
            "--finetune chooses its objective, epochs and learning rate on held-out data: pass --val"
        )
    try:
        rates = tuple(float(v) for v in args.finetune_lr.split(","))
    except ValueError as exc:
        raise ConfigurationError(f"--finetune-lr takes numbers separated by commas, got {args.finetune_lr!r}") from exc
    return FinetuneConfig(
        objectives=tuple(v.strip() for v in args.finetune_objectives.split(",")),
        epochs=args.finetune_epochs,
        learning_rates=rates,
        max_minutes=args.max_minutes,
        threads=args.threads,
    )


def finetune_warnings(args: argparse.Namespace) -> list[str]:
    """Fine-tune options given without --finetune do nothing; say so."""
    if args.finetune:
        return []
    given = [
        flag
        for flag, value, default in (
            ("--max-minutes", args.max_minutes, None),
            ("--finetune-objectives", args.finetune_objectives, "contrastive,cross-entropy"),
            ("--finetune-epochs", args.finetune_epochs, 2),
            ("--finetune-lr", args.finetune_lr, "5e-5"),
        )
        if value != default
    ]
    return [f"{', '.join(given)} only apply with --finetune"] if given else []


@dataclass(frozen=True, slots=True)
class _DeskFit:
    """``fit --desk DIR``: the desk's examples as training data, its labelled questions (``--val``) as validation
    data, and what to write next to the router and into ``desk.toml``."""

    directory: Path
    output: Path
    config: DeskConfig
    train: list[LabelledExample]
    val: list[LabelledExample] | None

    @property
    def config_file(self) -> Path:
        return self.directory / "desk.toml"

    def record(self, stage: Path) -> None:
        from routegate.apps.configured.fitted import record_fit

        record_fit(stage, self.config)

    def point_at(self) -> str:
        from routegate.apps.configured.fitted import point_config_at

        return point_config_at(self.directory, self.output)


def _desk_encoder(desk: Path) -> str:
    """The encoder ``DIR/desk.toml`` routes with (``[router] encoder``; absent: ``minilm``)."""
    from routegate.apps.configured.config import load_config

    return load_config(desk).router.encoder or "minilm"


def _desk_fit(args: argparse.Namespace) -> _DeskFit:
    """The training data of ``fit --desk DIR``; the options that mean nothing for a desk are refused first."""
    from routegate.apps.configured.config import load_config
    from routegate.apps.configured.evaluate import read_labelled
    from routegate.apps.configured.fitted import DEFAULT_FITTED, training_examples
    from routegate.apps.support.semantic import DEFAULT_ROUTE
    from routegate.routers.data import LabelledExample

    if args.default_route != "oos" or args.oos_label != "oos":
        raise ConfigurationError(
            f"--default-route and --oos-label do not apply with --desk: a desk's out-of-scope messages go to its "
            f"{DEFAULT_ROUTE} route; leave them out"
        )
    config = load_config(args.desk)
    train = training_examples(config)
    val = [LabelledExample(text, route) for text, route in read_labelled(Path(args.val))] if args.val else None
    unknown = sorted({e.label for e in val or ()} - {e.label for e in train})
    if unknown:
        raise ConfigurationError(
            f"{args.val}: questions labelled {', '.join(unknown)}, but {args.desk / 'desk.toml'} has no route with "
            "examples of that kind to learn it from; remove those questions or add the route"
        )
    args.default_route = DEFAULT_ROUTE
    args.output = args.output or str(args.desk / DEFAULT_FITTED)
    return _DeskFit(Path(args.desk), Path(args.output), config, train, val)


def run_fit(args: argparse.Namespace) -> int:
    """fit and calibrate a semantic router from labelled JSONL and save it

    Fit a semantic router on --train (JSONL lines {"text": ..., "label": ...}; the label "oos" marks a query no
    route fits), calibrate its out-of-scope threshold (and clarify margin) on --val, and save it to the directory
    -o. Without --val, calibration uses cross-validation on --train. The data needs at least 2 labels (2 routes, or
    1 route plus out-of-scope rows) and at least 2 examples per route. With --desk DIR instead of --train: the
    examples of DIR/desk.toml's routes are the training data (each labelled with its kind's route: POSTGRES,
    VECTOR, EXTERNAL, LLM), --val takes the desk's labelled questions ({"text", "route"}), the router is saved in
    DIR/router (or -o) and DIR/desk.toml's [router] fitted names it; it is fitted with the desk's [router] encoder
    unless --encoder names another.
    """
    from routegate.embed.choice import encoder_named
    from routegate.routers import FitConfig, MisrouteLog, SemanticRouter
    from routegate.routers.data import load_examples

    if args.encoder is None:
        args.encoder = _desk_encoder(args.desk) if args.desk is not None else "minilm"

    finetune = finetune_config(args) if args.finetune else None  # a missing extra is said first
    if finetune is not None and args.encoder != "minilm":
        raise ConfigurationError(f"--finetune fine-tunes the embedded MiniLM: leave out --encoder {args.encoder}")
    if args.encoder == "multilingual-e5":
        require("multilingual")  # the missing extra is said before the long part
    if args.desk is None and not args.output:
        raise ConfigurationError("fit --train needs -o DIR: the directory to write the router to")
    desk = _desk_fit(args) if args.desk is not None else None
    defaults = FitConfig()
    config = FitConfig(
        oos_recall_floor=defaults.oos_recall_floor if args.oos_recall_floor is None else args.oos_recall_floor,
        inscope_coverage=defaults.inscope_coverage if args.inscope_coverage is None else args.inscope_coverage,
        clarify_cost=args.clarify_cost,
        char_ngrams=False if args.no_char_ngrams else "auto",
        scores=score_names(args.scores),
    )
    if desk is not None:
        train, val = desk.train, desk.val
    else:
        train = load_examples(args.train)
        val = load_examples(args.val) if args.val else None
    if args.misroutes:
        extra = MisrouteLog(args.misroutes).examples()
        print(f"adding {len(extra)} labelled misroute(s) from {args.misroutes}", file=sys.stderr)
        train += extra
    n_oos = sum(e.label == args.oos_label for e in [*train, *(val or [])])
    for line in [*objective_warnings(args, n_oos, config), *finetune_warnings(args)]:
        print(f"warning: {line}", file=sys.stderr)
    with staged_output(args.output) as stage:  # checked before fitting; renamed into place at the end
        started = time.perf_counter()
        print(f"fitting on {len(train)} examples ...", file=sys.stderr)
        encoder: Any = encoder_named(args.encoder, settings=_settings(), intra_op_num_threads=args.threads)
        if not args.no_progress:
            encoder = ProgressEncoder(encoder, sys.stderr)
        sweep: dict[str, Any] | None = None
        if finetune is not None:
            from routegate.routers.finetune import fit_finetuned

            assert val is not None  # finetune_config refuses a fit without --val
            result = fit_finetuned(
                train,
                val=val,
                finetune=finetune,
                config=config,
                default_route=args.default_route,
                oos_label=args.oos_label,
                baseline_encoder=encoder,
                progress=None if args.no_progress else sys.stderr,
            )
            router = result.router
            sweep = {
                "chosen": result.best.to_dict(),
                "finetuned": result.finetuned,
                "candidates": len(result.candidates),
                "stopped_by_budget": result.stopped_by_budget,
                "not_started": list(result.skipped),
                "seconds": round(result.seconds, 1),
            }
        else:
            router = SemanticRouter.fit(
                train,
                val=val,
                encoder=encoder,
                default_route=args.default_route,
                oos_label=args.oos_label,
                config=config,
            )
        router.save(stage)
        if desk is not None:
            desk.record(stage)
    if desk is not None:
        print(f"{desk.config_file}: [router] fitted = {desk.point_at()!r}: the desk routes with it", file=sys.stderr)
    cal = router.calibration
    print(f"objective: {describe_objective(cal.objective, cal.target, n_oos, args.oos_label)}", file=sys.stderr)
    summary = {
        "router": str(Path(args.output)),
        "routes": len(router.routes),
        "fit_seconds": round(time.perf_counter() - started, 2),
        "calibration": {k: v for k, v in cal.to_dict().items() if k != "grid"},
    }
    if sweep is not None:
        summary["finetune"] = sweep
    print(json.dumps(summary, indent=2) if args.json else "\n".join(fit_lines(summary)))
    return 0


_ROUTER_ONLY: tuple[tuple[str, str, object], ...] = (
    ("--plot", "plot", None),
    ("--ray", "ray", False),
    ("--ray-actors", "ray_actors", None),
    ("--unknown-as-oos", "unknown_as_oos", False),
    ("--oos-label", "oos_label", "oos"),
)
"""``eval`` options that mean something for a saved router only: (flag, attribute, default)."""


def _eval_desk(args: argparse.Namespace) -> int:
    """``eval --desk DIR FILE``: the desk's router on its labelled questions (``desk eval``'s implementation)."""
    from routegate.cli.desk import evaluate_desk

    given = [flag for flag, name, default in _ROUTER_ONLY if getattr(args, name) != default]
    if given:
        them = "it" if len(given) == 1 else "them"
        raise ConfigurationError(f"{', '.join(given)}: for --router only, not for --desk; leave {them} out")
    return evaluate_desk(args.desk, Path(args.data), as_json=args.json)


def run_eval(args: argparse.Namespace) -> int:
    """evaluate a saved router or a desk's router on labelled JSONL (accuracy, OOS detection, latency, curves)

    Route every line of FILE one query at a time with a saved router and report in-scope accuracy, out-of-scope
    precision/recall/F1, per-route precision/recall, confusion, latency p50/p99 and the risk-coverage curve. With
    out-of-scope rows it also reports the OOS AUROC of each score the router computes (p_top, knn, mahalanobis,
    relative_mahalanobis, energy, and confidence: the one it decides with, chosen at fit time on --val) so you see which one your data
    favours, and the cascade's LLM band: how many queries a CascadeRouter over this router would send to its LLM
    stage (outcome default or clarify) and the accuracy with an oracle there, the most a model tier can add. A
    progress bar goes to stderr. Every label of FILE must be a route of the router or the out-of-scope label:
    unknown labels are refused (listed), unless --unknown-as-oos. With --desk DIR instead of --router: the desk's
    router (rules and embedding layer, no database, no tool) on FILE's labelled questions ({"text", "route"}).
    """
    from routegate.routers import SemanticRouter, evaluate
    from routegate.routers.data import load_examples
    from routegate.routers.evaluation import UnknownLabels, plot_report, progress_bar

    if args.desk is not None:
        return _eval_desk(args)
    if args.plot:
        require("plot")  # the missing extra is said before the long part
        _check_plot_path(args.plot)
    if args.ray:
        from routegate.routers.ray_batch import import_ray

        import_ray()  # the missing extra is said before the long part
    # the encoder the router was fitted with: the embedded MiniLM, the fine-tuned model it holds, the endpoint's
    router = SemanticRouter.load(args.router, encoder=_fitted_encoder(args.router, args.threads))
    data = load_examples(args.data)
    progress = None if args.no_progress else progress_bar(sys.stderr)
    unknown: UnknownLabels = "oos" if args.unknown_as_oos else "refuse"
    if args.ray:
        from routegate.routers.ray_batch import evaluate_on_ray, ray_session

        with ray_session():
            report = evaluate_on_ray(
                args.router,
                data,
                routes=router.routes,
                default_route=router.default_route,
                oos_label=args.oos_label,
                unknown_labels=unknown,
                progress=progress,
                actors=args.ray_actors,
                threads=args.threads,
            )
    else:
        report = evaluate(router, data, oos_label=args.oos_label, progress=progress, unknown_labels=unknown)
    # the report first: a plot that cannot be written must not lose it
    if args.json:
        print(json.dumps(report.to_dict(), indent=2), flush=True)
    else:
        print(report.summary(), flush=True)
    if args.plot:
        plot_report(report, args.plot, title=f"{args.router} on {args.data}")
    return 0
