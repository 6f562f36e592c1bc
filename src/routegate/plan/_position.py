"""Where a run stands before its next step: the value a durable run's checkpoint saves and a resume restores.

The interpreter keeps its position in locals on the hot path (a run that is not durable never builds one); a
durable run hands a :class:`Position` to :meth:`~routegate.plan.durable.DurableRun.save` before every step and gets
one back from :meth:`~routegate.plan.durable.DurableRun.restore`, so the checkpoint code never sees the
interpreter's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routegate.plan.envelope import Envelope

Decision = tuple[str | None, str]
"""A routing decision after a step: ``(name of the step routed to or None for declared order / the end, why)``."""


@dataclass(slots=True)
class Position:
    """A run before step ``at`` runs.

    A plain ``slots`` dataclass, not a frozen one, like the other values built on every step or run
    (docs/design-decisions.md): frozen construction costs about 0.5 µs more, and a durable run builds one before every
    step. Treat it as read-only: the interpreter builds a new one each time, and the checkpoint reads it at once.

    * ``at`` — the index of the step (or first member of the parallel band) about to run;
    * ``prev`` — the payload it receives when it reads the previous step (an :class:`ErrorInfo` when a route
      caught the previous step's error, a dict of payloads after a band);
    * ``iterations`` — the steps run so far (a band counts once);
    * ``rejoin`` — the index of the routing step whose ``after_branches=`` rejoin is pending, or ``-1``;
    * ``envelopes`` and ``decisions`` — the path so far, one decision per envelope. On :meth:`save` they are the
      run's own lists, read at once and not kept.
    """

    at: int
    prev: Any
    iterations: int
    rejoin: int
    envelopes: Sequence[Envelope]
    decisions: Sequence[Decision]


__all__ = ["Decision", "Position"]
