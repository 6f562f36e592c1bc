"""Events a plan run emits while it runs (``Plan.iter``): one :class:`StepEvent` per executed step, in order,
then the one final event of every runtime, :class:`~routegate.core.FinalEvent`, carrying the
:class:`~routegate.plan.PlanResult`.

A step's event is emitted once its routing is decided (so ``next`` and ``why`` are known), before the next step
starts. The fields are those of the step's :class:`~routegate.core.TraceEntry` in ``result.trace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from routegate.core.contracts import TraceEntry
from routegate.core.events import FinalEvent
from routegate.plan.envelope import Envelope

if TYPE_CHECKING:
    from routegate.plan.result import PlanResult  # PlanEvent names it (result imports us)


@dataclass(frozen=True, slots=True)
class StepEvent:
    """A step ran: its 1-based position in the run (``attempt``), name, whether it succeeded, how long its target
    took, the step routed to (``None`` for linear progression or the end), what decided, its stop reason when it
    failed, and its :class:`~routegate.plan.Envelope`."""

    attempt: int
    step: str
    ok: bool
    elapsed_ms: float
    next: str | None
    why: str
    stop_reason: str | None = None
    envelope: Envelope | None = field(default=None, repr=False, compare=False)
    type: str = "step"

    @classmethod
    def of(cls, attempt: int, env: Envelope, decision: tuple[str | None, str]) -> StepEvent:
        error = env.error
        return cls(
            attempt,
            env.step or "",
            error is None,
            round(env.elapsed_ms, 3),
            decision[0],
            decision[1],
            None if error is None else error.stop_reason,
            env,
        )

    def trace_entry(self) -> TraceEntry:
        """The same step as a line of ``result.trace``."""
        return TraceEntry(
            attempt=self.attempt,
            target=self.step,
            ok=self.ok,
            phase="step",
            elapsed_ms=self.elapsed_ms,
            stop_reason=self.stop_reason,
            why=self.why,
            next=self.next,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "attempt": self.attempt,
            "step": self.step,
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "next": self.next,
            "why": self.why,
        }
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        return out


PlanFinalEvent = FinalEvent
"""The old name of :class:`~routegate.core.FinalEvent` in a plan's stream (``routegate.plan.PlanFinalEvent`` warns)."""

PlanEvent: TypeAlias = StepEvent | FinalEvent["PlanResult[Any]"]
