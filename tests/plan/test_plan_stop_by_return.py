"""A step may *return* a RunStopError instead of raising it: the run ends exactly as if the step had raised it —
the same stop reason, message, phase, error, path, routing decisions, trace and output — in every kind of step
the engine runs (synchronous, asynchronous, given the run's context, a band member), whatever the stop says."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import Budget, RunContext
from routegate.errors import RunStopError
from routegate.plan import Plan, PlanResult, Step, when

PHASES = st.sampled_from([None, "route", "delegate", "finalize", "step", "not-a-phase"])
STEP_PHASES = st.sampled_from(["route", "delegate", "finalize", "step"])
TEXT = st.text(min_size=0, max_size=40)
REASONS = st.text(min_size=1, max_size=40)
KINDS = st.sampled_from(["sync", "async", "context", "band"])


def _view(result: PlanResult[Any]) -> dict[str, Any]:
    """Everything a caller can read of how the run ended (the exception object aside: one was raised, one not)."""
    error = result.error
    return {
        "outcome": result.outcome,
        "output": result.output,
        "path": result.path,
        "error": None if error is None else (error.type, error.message, error.stop_reason, error.phase),
        "exception": None if error is None else (type(error.exception), str(error.exception)),
        "envelopes": [(env.step, env.payload, env.error) for env in result.envelopes],
        "trace": [_timeless(entry.to_dict()) for entry in result.trace],
        "json": json.dumps(_timeless(result.to_dict()), sort_keys=True),
    }


def _timeless(value: Any) -> Any:
    """``value`` without its ``elapsed_ms`` fields (timings differ from run to run)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "elapsed_ms"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _plan(kind: str, phase: str, stopping: Callable[..., Any], *, routed: bool) -> Plan[Any, Any]:
    """``first`` → (the stopping step) → ``last``; ``routed``: the stopping step's error is routed to ``caught``."""
    routes = {"caught": when.errored()} if routed else None
    stop_step = Step(stopping, name="stopping", phase=phase, routes=routes)  # type: ignore[arg-type]
    budget = Budget(max_seconds=30) if kind == "context" else None
    if kind == "band":
        steps = [
            Step(lambda x: x, name="first"),
            Step(stopping, name="stopping", phase=phase, parallel=True),  # type: ignore[arg-type]
            Step(lambda x: x, name="sibling", parallel=True),
            Step(lambda x: ("caught", x), name="caught"),
        ]
        return Plan(*steps, budget=budget)
    return Plan(
        Step(lambda x: x, name="first"),
        stop_step,
        Step(lambda x: ("last", x), name="last"),
        Step(lambda x: ("caught", str(x)), name="caught"),
        budget=budget,
    )


def _stopping(kind: str, make: Callable[[], RunStopError], returns: bool) -> Callable[..., Any]:
    if kind in ("sync", "band"):

        def sync_step(value: Any) -> Any:
            if returns:
                return make()
            raise make()

        return sync_step
    if kind == "async":

        async def async_step(value: Any) -> Any:
            if returns:
                return make()
            raise make()

        return async_step

    async def context_step(value: Any, ctx: RunContext[Any]) -> Any:
        if returns:
            return make()
        raise make()

    return context_step


@settings(max_examples=60, deadline=None)
@given(kind=KINDS, step_phase=STEP_PHASES, reason=REASONS, message=TEXT, phase=PHASES, routed=st.booleans())
def test_a_returned_stop_ends_the_run_exactly_as_a_raised_one(
    kind: str, step_phase: str, reason: str, message: str, phase: str | None, routed: bool
) -> None:
    def make() -> RunStopError:
        return RunStopError(reason, message, phase=phase)

    raised = _plan(kind, step_phase, _stopping(kind, make, returns=False), routed=routed).run("in")
    returned = _plan(kind, step_phase, _stopping(kind, make, returns=True), routed=routed).run("in")
    assert _view(returned) == _view(raised)
    assert "stopping" in returned.path
    if not routed or kind == "band":  # nothing catches it: the run stops with the step's own stop
        assert (returned.stop_reason, returned.message) == (reason, message or reason)
        expected = phase if phase in ("route", "delegate", "finalize", "step") else step_phase
        assert returned.phase == expected


def test_a_returned_stop_is_not_the_output_of_a_step_that_declares_one() -> None:
    """The stop is checked before ``output=``: the step's model never sees it."""
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    plan: Plan[Any, Any] = Plan(Step(lambda x: RunStopError("quota:used_up", "no quota left"), name="s", output=Answer))
    result = plan.run("x")
    assert (result.stop_reason, result.phase, result.message) == ("quota:used_up", "step", "no quota left")
    assert result.error is not None and isinstance(result.error.exception, RunStopError)
