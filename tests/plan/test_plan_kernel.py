"""The Plan speaks the core's language: Budget (deadline and step bound) as stop reasons, RunStopError's phase,
the Outcome, raise_for_stop(), RunContext injection (incl. nested plans) and the iter() event stream."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import routegate.plan._run as plan_module  # the clock deadlines are read on
from routegate.core import Budget, FinalEvent, Outcome, RunContext
from routegate.errors import RunStopError
from routegate.plan import (
    MaxIterationsExceeded,
    Plan,
    PlanCompileError,
    Step,
    StepContext,
    StepEvent,
    when,
)


@dataclass(frozen=True)
class Deps:
    user: str


class FakeClock:
    """Stands in for the plan's monotonic clock: steps move it forward instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(plan_module, "_monotonic", fake)
    return fake


def spin(**kwargs: Any) -> Step:
    return Step(lambda x: x, name="spin", routes={"spin": when.payload(lambda _: True)}, **kwargs)


# -- the budget: deadline ----------------------------------------------------------------------------------------
async def test_a_step_still_running_at_the_deadline_is_cut_off_and_the_run_stops_with_max_seconds() -> None:
    cancelled: list[str] = []

    async def waits_forever(x: Any) -> str:
        try:
            await asyncio.Event().wait()  # never set: only the deadline ends this step
        except asyncio.CancelledError:
            cancelled.append("wait")
            raise
        return "never"

    plan = Plan(
        Step(lambda x: x + 1, name="first"),
        Step(waits_forever, name="wait"),
        Step(lambda x: "never", name="after"),
        budget=Budget(max_seconds=0.05),
    )
    result = await plan.arun(1)
    assert (result.ok, result.stop_reason, result.phase) == (False, "max_seconds", "step")
    assert result.path == ("first", "wait") and result.output is None
    assert cancelled == ["wait"]  # the step was cancelled, not left running
    assert "max_seconds=0.05" in result.message and "'wait' was cut off" in result.message
    assert result.trace[-1].stop_reason == "max_seconds" and not result.trace[-1].ok
    assert result.outcome == Outcome(False, "max_seconds", "step", result.message)
    assert result.elapsed_ms >= 50.0  # it waited for the deadline (a lower bound, never an upper one)
    with pytest.raises(RunStopError) as caught:
        result.raise_for_stop()
    assert (caught.value.stop_reason, caught.value.phase) == ("max_seconds", "step")


async def test_the_deadline_cuts_off_a_parallel_band_and_a_nested_plan() -> None:
    async def waits_forever(x: Any) -> None:
        await asyncio.Event().wait()

    async def quick(x: Any) -> int:
        return 1

    band = Plan(
        Step(quick, name="quick", parallel=True),
        Step(waits_forever, name="slow", parallel=True),
        budget=Budget(max_seconds=0.02),
    )
    result = await band.arun(None)
    assert result.stop_reason == "max_seconds" and result.path == ("quick", "slow")
    assert [entry.stop_reason for entry in result.trace] == ["max_seconds", "max_seconds"]

    inner = Plan(Step(quick, name="i1"), Step(waits_forever, name="i2"), name="inner")
    outer = Plan(Step(quick, name="o1"), Step(inner), budget=Budget(max_seconds=0.02))
    result = await outer.arun(None)
    assert (result.stop_reason, result.phase, result.path) == ("max_seconds", "step", ("o1", "inner"))


def test_sync_run_checks_the_deadline_between_steps(clock: FakeClock) -> None:
    def slow(x: int) -> int:
        clock.now += 3.0  # a synchronous step cannot be interrupted: it takes 3 "seconds"
        return x + 1

    plan = Plan(Step(slow, name="s1"), Step(slow, name="s2"), Step(slow, name="s3"), budget=Budget(max_seconds=5))
    result = plan.run(0)
    assert (result.stop_reason, result.phase, result.path) == ("max_seconds", "step", ("s1", "s2"))
    assert "before step 's3' ran" in result.message
    assert all(entry.ok for entry in result.trace)  # the steps that ran finished; s3 never started


async def test_arun_of_synchronous_steps_checks_the_deadline_between_steps_too(clock: FakeClock) -> None:
    def slow(x: int) -> int:
        clock.now += 3.0
        return x + 1

    plan = Plan(Step(slow, name="s1"), Step(slow, name="s2"), Step(slow, name="s3"), budget=Budget(max_seconds=5))
    result = await plan.arun(0)
    assert (result.stop_reason, result.path) == ("max_seconds", ("s1", "s2"))


def test_without_a_budget_a_plan_has_no_deadline(clock: FakeClock) -> None:
    def slow(x: int) -> int:
        clock.now += 10_000.0
        return x + 1

    result = Plan(Step(slow, name="s1"), Step(slow, name="s2")).run(0)
    assert result.ok and result.output == 2 and result.phase is None and result.message == ""


# -- the budget: step bound --------------------------------------------------------------------------------------
def test_an_exhausted_iteration_budget_is_a_stop_reason_and_raise_for_stop_raises_max_iterations_exceeded() -> None:
    plan = Plan(spin(), budget=Budget(max_iterations=4))
    assert plan.max_iterations == 4
    result = plan.run(1)
    assert (result.ok, result.stop_reason, result.phase) == (False, "max_iterations", "step")
    assert result.path == ("spin",) * 4 and result.output is None
    assert result.to_dict()["phase"] == "step" and result.to_dict()["message"] == result.message
    with pytest.raises(MaxIterationsExceeded) as caught:
        result.raise_for_stop()
    assert (caught.value.limit, caught.value.path, caught.value.next_step) == (4, ("spin",) * 4, "spin")
    assert str(caught.value) == result.message


def test_max_iterations_is_shorthand_for_the_budget_bound() -> None:
    assert Plan(spin(), max_iterations=3).run(1).path == ("spin",) * 3
    assert Plan(spin(), max_iterations=3, budget=Budget(max_iterations=3)).max_iterations == 3
    with pytest.raises(PlanCompileError, match=r"max_iterations=3 disagrees with budget.max_iterations=100"):
        Plan(spin(), max_iterations=3, budget=Budget())
    with pytest.raises(PlanCompileError, match=r"budget= must be a routegate\.core\.Budget"):
        Plan(spin(), budget={"max_seconds": 1})  # type: ignore[arg-type]


# -- stops, phases, outcome, raise_for_stop ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phase", "expected"), [("route", "route"), ("finalize", "finalize"), (None, "step"), ("nonsense", "step")]
)
def test_a_run_stop_error_ends_the_run_with_its_stop_reason_and_phase(phase: str | None, expected: str) -> None:
    signal = RunStopError("policy:refused", "the policy refused", phase=phase)

    def refuse(x: Any) -> None:
        raise signal

    result = Plan(Step(refuse), Step(lambda x: "never", name="after")).run(1)
    assert result.path == ("refuse",)
    assert result.outcome == Outcome(False, "policy:refused", expected, "the policy refused")  # type: ignore[arg-type]
    assert (result.stop_reason, result.phase, result.message) == ("policy:refused", expected, "the policy refused")
    assert result.to_dict()["phase"] == expected and result.to_dict()["stop_reason"] == "policy:refused"
    with pytest.raises(RunStopError) as caught:
        result.raise_for_stop()
    assert caught.value is signal


def test_raise_for_stop_raises_a_failed_steps_own_exception_and_returns_a_successful_result() -> None:
    boom = LookupError("no such customer")

    def lookup(x: Any) -> None:
        raise boom

    failed = Plan(Step(lookup)).run(1)
    assert (failed.stop_reason, failed.phase) == ("step_error:LookupError", "step")
    with pytest.raises(LookupError) as caught:
        failed.raise_for_stop()
    assert caught.value is boom

    inner = Plan(Step(lookup), name="inner")
    with pytest.raises(LookupError) as nested:
        Plan(Step(inner)).run(1).raise_for_stop()
    assert nested.value is boom

    ok = Plan(Step(lambda x: x * 2, name="double")).run(2)
    assert ok.raise_for_stop() is ok
    assert ok.outcome == Outcome(True, "success") and ok.phase is None and ok.message == ""
    assert "phase" not in ok.to_dict() and "message" not in ok.to_dict()


# -- RunContext ----------------------------------------------------------------------------------------------------
async def test_targets_that_declare_a_run_context_receive_the_runs_context() -> None:
    seen: list[tuple[str, str, Any]] = []

    def plain(x: str, ctx: RunContext[Deps]) -> str:
        seen.append(("plain", ctx.run_id, ctx.deps))
        return x + "+plain"

    async def keyword_only(x: str, *, run: RunContext[Deps]) -> str:
        seen.append(("keyword_only", run.run_id, run.deps))
        return x + "+kw"

    class UsesStepContext:
        def run_step(self, payload: str, ctx: StepContext) -> str:
            assert ctx.run is not None
            seen.append(("step_context", ctx.run.run_id, ctx.run.deps))
            return payload + "+sc"

    class TakesRunContext:
        async def run_step(self, payload: str, ctx: RunContext[Deps]) -> str:
            seen.append(("run_step", ctx.run_id, ctx.deps))
            return payload + "+rc"

    class TakesBoth:
        def run_step(self, payload: str, ctx: StepContext, run: RunContext[Deps]) -> str:
            seen.append(("both:" + ctx.step, run.run_id, run.deps))
            return payload + "+both"

    inner = Plan(Step(plain), Step(TakesRunContext(), name="deep"), name="inner")
    plan = Plan(
        Step(keyword_only),
        Step(UsesStepContext(), name="sc"),
        Step(TakesBoth(), name="both"),
        Step(inner),
    )
    result = await plan.arun("x", deps=Deps("ann"))
    assert result.output == "x+kw+sc+both+plain+rc"
    assert [name for name, _, _ in seen] == ["keyword_only", "step_context", "both:both", "plain", "run_step"]
    assert {deps for _, _, deps in seen} == {Deps("ann")}
    assert len({run_id for _, run_id, _ in seen}) == 1  # one run, one context: the nested plan shares it

    again = await plan.arun("x", deps=Deps("bob"))
    assert again.ok and seen[-1][2] == Deps("bob") and seen[-1][1] != seen[0][1]  # a new run, a new id


def test_the_context_carries_the_budgets_deadline_or_none() -> None:
    deadlines: list[float] = []

    def note(x: Any, ctx: RunContext[None]) -> Any:
        deadlines.append(ctx.remaining())
        return x

    Plan(Step(note)).run(1)
    Plan(Step(note), budget=Budget(max_seconds=30)).run(1)
    assert deadlines[0] == math.inf and 0 < deadlines[1] <= 30


def test_a_run_context_parameter_in_the_payloads_place_is_a_compile_error() -> None:
    def backwards(ctx: RunContext[None], payload: Any) -> Any:
        return payload

    with pytest.raises(PlanCompileError, match="first parameter, where the step's input payload goes"):
        Plan(Step(backwards))


# -- iter() --------------------------------------------------------------------------------------------------------
async def test_iter_yields_one_event_per_executed_step_in_order_then_the_final_event() -> None:
    def check(x: int) -> int:
        if x > 1:
            raise ValueError("too big")
        return x

    big = when.payload(lambda v: v > 1)
    plan = Plan(
        Step(lambda x: x + 1, name="inc", routes={"big": big, "small": ~big}, after_branches="check"),
        Step(lambda x: x, name="big"),
        Step(lambda x: x, name="small"),
        Step(check, name="check", routes={"handle": when.errored()}),
        Step(lambda error: f"handled {error.type}", name="handle"),
    )
    events = [event async for event in plan.iter(1)]
    *steps, final = events
    assert isinstance(final, FinalEvent)
    assert all(isinstance(event, StepEvent) for event in steps)
    result = final.result
    assert [(e.attempt, e.step, e.ok, e.next, e.why) for e in steps if isinstance(e, StepEvent)] == [
        (1, "inc", True, "big", "when.payload(<lambda>)"),
        (2, "big", True, "check", "after_branches='check' of 'inc'"),
        (3, "check", False, "handle", "when.errored()"),
        (4, "handle", True, None, "end"),
    ]
    assert [e.trace_entry() for e in steps if isinstance(e, StepEvent)] == list(result.trace)
    assert result.output == "handled ValueError" and result.path == ("inc", "big", "check", "handle")
    assert steps[2].to_dict()["stop_reason"] == "step_error:ValueError"
    assert final.to_dict()["result"]["path"] == ["inc", "big", "check", "handle"]

    with pytest.warns(DeprecationWarning, match=r"^Plan\.astream is deprecated: call Plan\.iter, the same method"):
        old_name = plan.astream(1)  # the deprecated alias streams the same run
    streamed = [event async for event in old_name]
    assert [type(event) for event in streamed] == [type(event) for event in events]


async def test_iter_streams_a_stop_and_what_steps_send_through_the_context() -> None:
    def announce(x: Any, ctx: RunContext[None]) -> Any:
        ctx.send({"note": "working"})
        return x

    plan = Plan(Step(announce), spin(), max_iterations=3)
    events: list[object] = [event async for event in plan.iter(0)]
    assert events[0] == {"note": "working"}  # sent while the step ran, before its own StepEvent
    assert [e.step for e in events if isinstance(e, StepEvent)] == ["announce", "spin", "spin"]
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.result.stop_reason == "max_iterations"


async def test_closing_iter_early_cancels_the_run() -> None:
    cancelled = asyncio.Event()

    async def waits_forever(x: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = Plan(Step(lambda x: x, name="first"), Step(waits_forever)).iter(0)
    first = await anext(stream)
    assert isinstance(first, StepEvent) and first.step == "first"
    await stream.aclose()  # type: ignore[attr-defined]
    assert cancelled.is_set()


def test_a_nested_plans_step_targets_see_the_store_its_writes_go_to() -> None:
    class ReadBack:
        def run_step(self, payload: Any, ctx: StepContext) -> Any:
            assert ctx.store is not None and ctx.run is not None
            return ctx.store.read("kept")

    inner = Plan(Step(lambda x: x * 2, name="keep", writes="kept"), Step(ReadBack(), name="read"), name="inner")
    result = Plan(Step(lambda x: x + 1, name="first"), Step(inner)).run(1)
    assert result.ok and result.output == 4


@settings(max_examples=200, deadline=None)
@given(phase=st.one_of(st.none(), st.text(max_size=20)), reason=st.text(min_size=1, max_size=40))
def test_any_phase_a_step_names_ends_as_a_known_phase_and_the_result_serialises(phase: str | None, reason: str) -> None:
    def stop(x: Any) -> None:
        raise RunStopError(reason, phase=phase)

    result = Plan(Step(stop)).run(None)
    assert result.stop_reason == reason and not result.ok
    assert result.phase in {"route", "delegate", "finalize", "step"}
    assert result.phase == (phase if phase in {"route", "delegate", "finalize", "step"} else "step")
    assert json.loads(json.dumps(result.to_dict()))["phase"] == result.phase
