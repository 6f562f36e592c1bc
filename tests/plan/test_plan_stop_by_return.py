"""A runtime's step may *return* its RunStopError instead of raising it (the routing agent's and the
dispatcher's refusals do, to save the cost of raising): the run ends exactly as if the step had raised it — the
same stop reason, message, phase, error, path, routing decisions, trace and output — whatever the stop says.
Only a runtime turns this on (``Runtime.returns_stops``); in a user's plan a returned RunStopError is an ordinary
output."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import Budget, RunContext
from routegate.errors import RunStopError
from routegate.plan import Plan, PlanResult, Runtime, Step, when

PHASES = st.sampled_from([None, "route", "delegate", "finalize", "step", "not-a-phase"])
STEP_PHASES = st.sampled_from(["route", "delegate", "finalize", "step"])
TEXT = st.text(min_size=0, max_size=40)
REASONS = st.text(min_size=1, max_size=40)


class Returning(Runtime[Any, PlanResult[Any]]):
    """A runtime whose steps may return their stops, and whose result is the plan's own."""

    returns_stops = True

    def result(self, state: Any, ended: PlanResult[Any], ctx: RunContext[Any]) -> PlanResult[Any]:
        return ended


class Raising(Returning):
    """The same runtime, but its steps' returned stops are ordinary outputs (they raise theirs)."""

    returns_stops = False


def _timeless(value: Any) -> Any:
    """``value`` without its ``elapsed_ms`` fields (timings differ from run to run)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "elapsed_ms"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


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


def _plan(stop: RunStopError, returns: bool, phase: str, routed: bool, timed: bool) -> Returning:
    """``first`` → ``stopping`` (returns or raises ``stop``) → ``last``; ``routed``: its error goes to ``caught``."""

    async def first(value: Any, ctx: RunContext[Any]) -> Any:
        return value

    async def stopping(value: Any, ctx: RunContext[Any]) -> Any:
        if returns:
            return stop
        raise stop

    async def last(value: Any, ctx: RunContext[Any]) -> Any:
        return ("last", value)

    async def caught(value: Any, ctx: RunContext[Any]) -> Any:
        return ("caught", str(value))

    routes = {"caught": when.errored()} if routed else None
    runtime = Returning() if returns else Raising()
    Plan(
        Step(first, name="first"),
        Step(stopping, name="stopping", phase=phase, routes=routes),  # type: ignore[arg-type]
        Step(last, name="last"),
        Step(caught, name="caught"),
        budget=Budget(max_seconds=30) if timed else None,
        runtime=runtime,
    )
    return runtime


@settings(max_examples=80, deadline=None)
@given(step_phase=STEP_PHASES, reason=REASONS, message=TEXT, phase=PHASES, routed=st.booleans(), timed=st.booleans())
def test_a_returned_stop_ends_the_run_exactly_as_a_raised_one(
    step_phase: str, reason: str, message: str, phase: str | None, routed: bool, timed: bool
) -> None:
    raised = _plan(RunStopError(reason, message, phase=phase), False, step_phase, routed, timed).run("in")
    returned = _plan(RunStopError(reason, message, phase=phase), True, step_phase, routed, timed).run("in")
    assert _view(returned) == _view(raised)
    if routed:
        assert returned.ok and returned.path == ("first", "stopping", "caught")
    else:  # nothing catches it: the run stops with the step's own stop
        assert returned.path == ("first", "stopping")
        assert (returned.stop_reason, returned.message) == (reason, message or reason)
        assert returned.phase == (phase if phase in ("route", "delegate", "finalize", "step") else step_phase)


def test_in_a_users_plan_a_returned_stop_is_an_ordinary_output() -> None:
    stop = RunStopError("quota:used_up", "no quota left")

    async def answer(value: Any, ctx: RunContext[Any]) -> Any:
        return stop

    result = Plan(Step(answer, name="answer")).run("x")
    assert result.ok and result.output is stop
