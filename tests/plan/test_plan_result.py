"""A plan run returns the one result type: a ``PlanResult`` is a core ``RunResult`` — ``output`` is the last
payload, ``run_id`` the run context's (shared by a nested plan), ``outcome`` the only stop value — and
``payload``, the old name of ``output``, still reads with a warning."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from routegate import Plan, RunContext, RunResult, Step
from routegate.core import Budget, FinalEvent, Outcome
from routegate.plan import PlanResult


def test_a_plan_result_is_a_run_result_whose_output_is_the_last_payload() -> None:
    result = Plan(Step(lambda x: x + 1, name="inc"), Step(lambda x: x * 10, name="times")).run(1)
    assert isinstance(result, PlanResult) and isinstance(result, RunResult)
    assert (result.output, result.ok, result.status, result.outcome) == (20, True, "ok", Outcome.success())
    assert result.to_dict()["payload"] == 20 and "output" not in result.to_dict()  # the JSON form keeps its keys
    assert [entry.target for entry in result.trace] == ["inc", "times"]


def test_the_run_id_is_the_run_contexts_and_a_nested_plan_shares_it() -> None:
    seen: list[tuple[str, str]] = []

    def outer_step(x: int, ctx: RunContext[Any]) -> int:
        seen.append(("outer", ctx.run_id))
        return x

    def inner_step(x: int, ctx: RunContext[Any]) -> int:
        seen.append(("inner", ctx.run_id))
        return x + 1

    inner = Plan(Step(inner_step, name="inner_step"), name="inner")
    result = Plan(Step(outer_step), Step(inner)).run(1)
    assert result.output == 2
    assert seen == [("outer", result.run_id), ("inner", result.run_id)]
    assert result.envelope("inner").metadata["plan"].run_id == result.run_id


def test_a_lean_run_gets_its_run_id_when_first_read_and_keeps_it() -> None:
    result = Plan(Step(lambda x: x, name="same")).run("x")
    first = result.run_id
    assert len(first) == 16 and int(first, 16) >= 0 and result.run_id == first
    other = Plan(Step(lambda x: x, name="same")).run("x")
    assert other.run_id != first


def test_a_stop_is_stored_once_and_its_message_is_the_outcomes() -> None:
    def fail(_: object) -> None:
        raise ValueError  # no text: the stop's message is the fault's class-only report in every view

    stopped = Plan(Step(fail)).run(None)
    report = "step 'fail' raised ValueError (details in the log)"
    assert stopped.outcome == Outcome(False, "step_error:ValueError", "step", report)
    assert stopped.message == stopped.outcome.message == stopped.to_dict()["message"] == report
    assert stopped.output is None and not stopped.ok and stopped.status == "stopped"
    with pytest.raises(ValueError) as raised:  # noqa: PT011  # the step's exception has no text to match
        stopped.raise_for_stop()
    assert str(raised.value) == ""  # the step's own exception


def test_a_deadline_stop_carries_the_run_contexts_id() -> None:
    seen: list[str] = []

    async def slow(x: int, ctx: RunContext[Any]) -> int:
        seen.append(ctx.run_id)
        await asyncio.Event().wait()  # never set: the deadline cuts it off
        return x

    result = asyncio.run(Plan(Step(slow), budget=Budget(max_seconds=0.05)).arun(1))
    assert result.stop_reason == "max_seconds" and seen == [result.run_id]


def test_payload_is_the_old_name_of_output_and_warns() -> None:
    result = Plan(Step(lambda x: x * 2, name="double")).run(21)
    with pytest.warns(DeprecationWarning, match=r"^PlanResult\.payload is deprecated: read PlanResult\.output"):
        payload = result.payload  # type: ignore[deprecated]
    assert payload == result.output == 42


def test_the_stream_ends_with_the_core_final_event() -> None:
    async def events() -> list[Any]:
        return [event async for event in Plan(Step(lambda x: x, name="same")).iter("x")]

    last = asyncio.run(events())[-1]
    assert type(last) is FinalEvent and isinstance(last.result, PlanResult) and last.result.output == "x"
    assert json.loads(json.dumps(last.to_dict()))["result"]["payload"] == "x"
