"""The public API's types, as a user's type checker sees them.

mypy checks this file (``[tool.mypy] files`` in pyproject.toml, so ``python3 dev.py check`` and CI run it): each
``assert_type`` fails the type check when an inferred type drifts, and each ``# type: ignore[<code>]`` fails it
when the mistake it marks stops being reported (``warn_unused_ignores``, part of ``--strict``). pytest runs the
same code, so every typed path is also exercised for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, assert_type

import pytest

from routegate import Plan, RoutingAgent, RunContext, RunResult, Step, worker
from routegate.apps.support import TurnResult
from routegate.apps.support.contracts import SupportRoute
from routegate.core import AgentResult, FinalEvent, Outcome, TicketArgs, TraceEntry
from routegate.plan import PlanResult, Runtime
from routegate.technique import DispatchOutcome, DispatchResult, TechniqueDispatcher, TechniqueRouter
from routegate.testing import ScriptedRouter

ROUTE = {"kind": "route", "target": "billing", "args": {"ticket": "refund my order"}}


@dataclass(frozen=True)
class Shop:
    currency: str


def _billing(ticket: str, ctx: RunContext[Shop]) -> dict[str, object]:
    assert_type(ctx.deps, Shop)
    return {"status": "done", "domain": "billing", "result": {"ticket": ticket, "currency": ctx.deps.currency}}


def _agent(*routes: object) -> RoutingAgent[Shop]:
    billing = worker(name="billing", args=TicketArgs, inline=True)(_billing)
    return RoutingAgent[Shop](workers=[billing], router=ScriptedRouter(routes))


def test_a_routing_agent_run_is_the_one_result_type_with_typed_deps_and_output() -> None:
    result = _agent(ROUTE).run("refund my order", deps=Shop("EUR"))
    assert_type(result, AgentResult)
    assert_type(result.output, str | None)
    assert_type(result.outcome, Outcome)
    assert_type(result.ok, bool)
    assert_type(result.trace, tuple[TraceEntry, ...])
    assert_type(result.run_id, str)
    assert_type(result.elapsed_ms, float)
    assert_type(result.raise_for_stop(), AgentResult)
    one: RunResult[str | None] = result  # an AgentResult is a RunResult
    assert one.ok and one.outcome == Outcome.success()
    assert one.output is not None and "EUR" in one.output
    assert result.history[-1].observation["result"] == {"ticket": "refund my order", "currency": "EUR"}


def _deps_are_checked(agent: RoutingAgent[Shop], plan: Plan[Shop, str]) -> None:
    """Never called: the type checker must refuse deps of the wrong type."""
    agent.run("refund", deps="EUR")  # type: ignore[arg-type]
    plan.run({"amount": 1.0}, deps="EUR")  # type: ignore[arg-type]


def test_an_unsubscripted_runtime_takes_any_deps() -> None:
    def echo(text: str, ctx: RunContext[Any]) -> str:
        return f"{text} for {ctx.deps!r}"

    plan = Plan(Step(echo))
    assert_type(plan, Plan[Any, Any])
    assert plan.run("hi", deps=42).output == "hi for 42"


def _price(order: dict[str, float], ctx: RunContext[Shop]) -> str:
    return f"{order['amount']:.2f} {ctx.deps.currency}"


def test_a_plan_run_is_the_one_result_type_with_typed_deps_and_output() -> None:
    plan = Plan[Shop, str](Step(_price))
    result = plan.run({"amount": 5.0}, deps=Shop("EUR"))
    assert_type(result, PlanResult[str])
    assert_type(result.output, str | None)
    assert_type(result.outcome, Outcome)
    assert_type(result.trace, tuple[TraceEntry, ...])
    assert_type(result.run_id, str)
    assert_type(result.raise_for_stop(), PlanResult[str])
    one: RunResult[str | None] = result
    assert one.ok and one.output == "5.00 EUR"
    assert [entry.target for entry in one.trace] == ["_price"]


def test_every_runtime_ends_its_stream_with_the_one_final_event() -> None:
    async def last_results() -> tuple[AgentResult, PlanResult[Any]]:
        agent_result = plan_result = None
        async for event in _agent(ROUTE).iter("refund my order", deps=Shop("USD")):
            if isinstance(event, FinalEvent):
                assert_type(event.result, AgentResult)
                agent_result = event.result
        async for step_or_final in Plan[Shop, str](Step(_price)).iter({"amount": 2.0}, deps=Shop("USD")):
            if isinstance(step_or_final, FinalEvent):
                assert_type(step_or_final.result, PlanResult[Any])
                plan_result = step_or_final.result
        assert agent_result is not None and plan_result is not None
        return agent_result, plan_result

    agent_result, plan_result = asyncio.run(last_results())
    assert agent_result.ok and plan_result.output == "2.00 USD"


def test_a_dispatch_is_the_one_result_type_over_its_parts() -> None:
    result = TechniqueDispatcher(handlers=[], allow=[]).dispatch(TechniqueRouter().classify("plain prose"))
    assert_type(result, DispatchResult)
    assert_type(result.output, tuple[DispatchOutcome, ...])
    one: RunResult[tuple[DispatchOutcome, ...]] = result
    assert one.ok and one.output == ()


def test_the_desks_turn_is_the_one_result_type() -> None:
    turn = TurnResult("s-1", "LLM", "hello", "success", None, (), 12.5)
    assert_type(turn.ok, bool)
    assert_type(turn.output, str)
    assert_type(turn.elapsed_ms, float)
    assert_type(turn.run_id, str)
    assert_type(turn.outcome, Outcome)
    assert_type(turn.answer, str)
    assert_type(turn.latency_ms, float)
    one: RunResult[str] = turn
    final: FinalEvent[TurnResult] = FinalEvent(turn)
    assert_type(final.result.route, SupportRoute)
    assert isinstance(one, RunResult) and final.result is turn
    assert turn.ok and turn.output == "hello" and turn.elapsed_ms == 12.5 and len(turn.run_id) == 16
    assert_type(turn.trace, tuple[TraceEntry, ...])  # the run's trace, as every result's: not overridden
    assert_type(turn.notes, tuple[Mapping[str, Any], ...])  # the desk's own record, a field it adds
    assert "trace" not in vars(TurnResult) and "__init__" in vars(TurnResult)


def test_old_names_are_flagged_by_the_type_checker_and_warn() -> None:
    result = _agent(ROUTE).run("refund my order", deps=Shop("EUR"))
    with pytest.warns(DeprecationWarning, match=r"^AgentResult\.answer is deprecated: read AgentResult\.output"):
        answer = result.answer  # type: ignore[deprecated]
    assert answer == result.output


class _Counted(RunResult[str | None]):
    __slots__ = ("words",)

    def __init__(self, ended: PlanResult[Any], words: int) -> None:
        super().__init__(ended.outcome, ended.output, ended.trace, ended.run_id, ended.elapsed_ms)
        self.words = words


class _Counting(Runtime[str, _Counted]):
    def result(self, state: str, ended: PlanResult[Any], ctx: RunContext[Any]) -> _Counted:
        return _Counted(ended, len(state.split()))


def test_a_runtimes_doors_are_typed_by_its_state_and_result() -> None:
    runtime = _Counting()
    Plan(Step(str.upper, name="shout"), runtime=runtime)
    result = runtime.run("two words")
    assert_type(result, _Counted)
    assert_type(result.output, str | None)
    assert_type(result.raise_for_stop(), _Counted)
    assert (result.output, result.words) == ("TWO WORDS", 2)
    assert_type(asyncio.run(runtime.arun("one")), _Counted)


def _state_is_checked(runtime: _Counting) -> None:
    """Never called: the type checker must refuse a state of the wrong type."""
    runtime.run(42)  # type: ignore[arg-type]
