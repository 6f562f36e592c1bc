"""What a step reads when its ``context=`` names an earlier step (``from_step``, ``from_parallel``) or a whole
parallel band (``from_parallel_all``): that step's latest payload (its :class:`~routegate.plan.ErrorInfo` when it
failed and a route caught it), or every member's by name. The previous payload and the run's input need no
function: the interpreter reads them itself."""

from __future__ import annotations

from typing import Any

from routegate.plan._compiled import BAND, Compiled
from routegate.plan.envelope import Envelope
from routegate.plan.errors import PlanRuntimeError


def from_step(step: Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> Any:
    """The input of ``step``, which reads an earlier step or band (``latest``: each step's latest envelope)."""
    if step.source == BAND:
        return _from_band(step, latest, envelopes)
    env = latest[step.source_index] if latest is not None else None
    if env is None:
        source = step.step.context
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={source!r} but that step has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — reorder the plan or read "
            "from a step that runs on every path"
        )
    return env.payload if env.error is None else env.error


def _from_band(step: Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> dict[str, Any]:
    """``from_parallel_all``: the payload of every member of the band, by name (all ran, or the band did not)."""
    assert latest is not None
    first = latest[step.source_index]
    if first is None:
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={step.step.context!r} but that band has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — read from a band on every path"
        )
    joined: dict[str, Any] = {}
    for env in latest[step.source_index : step.source_end]:
        if env is not None:
            joined[env.step or ""] = env.payload if env.error is None else env.error
    return joined


__all__ = ["from_step"]
