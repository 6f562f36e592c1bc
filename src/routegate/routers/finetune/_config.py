"""What a fine-tune sweep may try, and what it found: :class:`FinetuneConfig` and :class:`Candidate`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from routegate.errors import ConfigurationError

BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
Objective = Literal["contrastive", "cross-entropy", "supcon"]
OBJECTIVES: tuple[Objective, ...] = ("contrastive", "cross-entropy", "supcon")
DEFAULT_OBJECTIVES: tuple[Objective, ...] = ("contrastive", "cross-entropy")


@dataclass(frozen=True, slots=True)
class FinetuneConfig:
    """The sweep :func:`~routegate.routers.finetune.fit_finetuned` runs; every choice in it is made on ``val``.

    ``objectives``: ``"contrastive"`` (in-batch negatives over pairs of examples of the same route, every route at
    most once per batch), ``"cross-entropy"`` (a linear classifier over the routes, dropped after training) and/or
    ``"supcon"`` (both at once on the contrastive batches: the classifier's cross-entropy plus a supervised
    contrastive loss over every text of the batch, which keeps each route's examples compact).
    Each (objective, learning rate) is one training run of ``epochs`` epochs (linear warm-up over the first
    ``warmup`` share of its steps, then linear decay); the model after each epoch is a candidate. ``baseline``:
    the encoder as shipped is a candidate too, so fine-tuning is kept only when it wins on ``val``.
    ``max_minutes``: the budget of the whole sweep (``None`` = none): training stops early enough to evaluate
    what it has, and no new run starts that cannot be evaluated in time. ``threads``: torch's and onnxruntime's
    threads while fitting (``None`` = all cores). ``max_tokens``: truncation while training (inference keeps the
    encoder's 256).
    """

    objectives: tuple[Objective, ...] = DEFAULT_OBJECTIVES
    epochs: int = 2
    learning_rates: tuple[float, ...] = (5e-5,)
    batch_size: int = 32
    warmup: float = 0.1
    head_learning_rate: float = 1e-3
    contrastive_scale: float = 20.0
    max_tokens: int = 64
    baseline: bool = True
    max_minutes: float | None = None
    threads: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.objectives or any(o not in OBJECTIVES for o in self.objectives):
            raise ConfigurationError(f"objectives must be a non-empty subset of {OBJECTIVES}, got {self.objectives}")
        if self.epochs < 1:
            raise ConfigurationError(f"epochs must be >= 1, got {self.epochs}")
        if not self.learning_rates or any(not 0 < lr < 1 for lr in self.learning_rates):
            raise ConfigurationError(f"learning_rates must be values in (0, 1), got {self.learning_rates}")
        if self.batch_size < 2:
            raise ConfigurationError(f"batch_size must be >= 2 (in-batch negatives), got {self.batch_size}")
        if not 0 <= self.warmup < 1:
            raise ConfigurationError(f"warmup must be in [0, 1), got {self.warmup}")
        if not 8 <= self.max_tokens <= 256:
            raise ConfigurationError(f"max_tokens must be between 8 and 256, got {self.max_tokens}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ConfigurationError(f"max_minutes must be > 0 or None, got {self.max_minutes}")
        if self.threads is not None and self.threads < 1:
            raise ConfigurationError(f"threads must be >= 1 or None, got {self.threads}")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One encoder the sweep measured on ``val``: how it was trained and what the calibrated router achieved."""

    objective: Objective | Literal["none"]
    learning_rate: float
    epochs: float  # fractional when the budget stopped an epoch
    steps: int
    val_in_scope_accuracy: float | None
    val_oos_recall: float | None
    val_coverage: float | None
    feasible: bool
    method: str
    train_seconds: float
    eval_seconds: float

    def key(self) -> tuple[bool, float, float]:
        """Better on the router's objective: feasible first, then in-scope accuracy, then OOS recall (or coverage)."""
        second = self.val_oos_recall if self.val_oos_recall is not None else self.val_coverage
        return (self.feasible, round(self.val_in_scope_accuracy or 0.0, 9), round(second or 0.0, 9))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
