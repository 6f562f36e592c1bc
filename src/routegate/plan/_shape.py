"""What a durable run's checkpoints know of the plan: its steps' names, bands, writes, output types and routing.

The checkpoint code (:mod:`routegate.plan.durable`, :mod:`routegate.plan._validate`) reads the plan through a
:class:`PlanShape` and nothing else: not the interpreter's compiled records (their callables, target kinds and
predicates), not the :class:`~routegate.plan.Plan`. The plan builds its shape once, on its first durable run
(:func:`routegate.plan._compiled.shape_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StepShape:
    """One step as a checkpoint sees it.

    * ``name`` and ``index`` — its name and its position in declared order;
    * ``band_end`` — on the first member of a parallel band, the index after the band (else ``0``);
    * ``writes`` — the store key it writes, if any;
    * ``decode`` — its ``output=`` validator (a stored payload is read back through it), if any;
    * ``routes`` — the indexes its ``routes=`` can choose (whatever the step's outcome), ``by_routes`` those its
      ``routes_by=`` values can (only after a step that succeeded);
    * ``rejoin`` / ``rejoin_why`` — the index and the decision text of its ``after_branches=`` (``-1``: none).
    """

    name: str
    index: int
    band_end: int
    writes: str | None
    decode: Callable[[Any], Any] | None
    routes: frozenset[int]
    by_routes: frozenset[int]
    rejoin: int
    rejoin_why: str


@dataclass(frozen=True, slots=True)
class PlanShape:
    """A plan's steps as its checkpoints see them, and the fingerprint its checkpoints carry."""

    steps: tuple[StepShape, ...]
    fingerprint: str


__all__ = ["PlanShape", "StepShape"]
