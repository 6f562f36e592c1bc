"""``GoalDoors``: an agent of one's own whose run starts from a goal gets ``arun``, ``run``, ``iter`` and
``run_step`` from its runtime, as the routing agent and the tool agent do (docs/plan.md, "Build a runtime")."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from routegate.core import FinalEvent, RunContext, RunResult
from routegate.errors import RunStopError
from routegate.plan import Plan, PlanResult, Runtime, Step
from routegate.plan.envelope import StepFailedError
from routegate.plan.goal_doors import GoalDoors
from routegate.plan.targets import StepContext


class _Ask:
    def __init__(self, goal: object, context: Mapping[str, Any], task: str | None) -> None:
        self.goal, self.context, self.task = goal, context, task


class _EchoRuntime(Runtime[_Ask, RunResult[str | None], str]):
    owner = "Echo"

    def result(self, state: _Ask, ended: PlanResult[Any], ctx: RunContext[Any]) -> RunResult[str | None]:
        return RunResult(ended.outcome, ended.output, ended.trace, ended.run_id, ended.elapsed_ms)


class _Echo(GoalDoors[_Ask, RunResult[str | None], str]):
    """Answers the goal with the context's ``name`` and the step's task."""

    def __init__(self) -> None:
        self._runtime = _EchoRuntime()
        Plan(Step(self._answer, name="answer"), runtime=self._runtime)

    def _state(self, goal: object, context: Mapping[str, Any], task: str | None) -> _Ask:
        return _Ask(goal, context, task)

    @staticmethod
    def _answer(ask: _Ask, ctx: RunContext[Any]) -> str:
        if ask.goal == "stop":
            raise RunStopError("echo_refused", "asked to stop", phase="route")
        ctx.send("answering")
        return f"{ask.goal} for {ask.context.get('name', '-')} ({ask.task})"


def test_the_doors_start_the_runtime_from_the_goal_and_its_context() -> None:
    echo = _Echo()
    assert echo.run("hello", context={"name": "Ada"}).output == "hello for Ada (None)"
    assert asyncio.run(echo.arun("hi")).output == "hi for - (None)"
    stopped = echo.run("stop")
    assert (stopped.stop_reason, stopped.phase, stopped.message) == ("echo_refused", "route", "asked to stop")


def test_iter_streams_the_steps_events_then_the_final_event() -> None:
    async def events() -> list[Any]:
        return [event async for event in _Echo().iter("hey")]

    streamed = asyncio.run(events())
    assert streamed[0] == "answering"
    assert isinstance(streamed[-1], FinalEvent) and streamed[-1].result.output == "hey for - (None)"


def test_as_a_plan_step_the_goal_is_the_payload_and_a_stop_fails_the_step() -> None:
    echo = _Echo()
    outer = Plan(Step(echo, name="echo", task="brief"))
    done = outer.run("question")
    assert done.ok and done.output.output == "question for - (brief)"
    failed = outer.run("stop")
    assert failed.stop_reason == "echo_refused"
    with pytest.raises(StepFailedError):
        asyncio.run(echo.run_step("stop", StepContext("echo", None, "stop", None)))  # a context made by hand
