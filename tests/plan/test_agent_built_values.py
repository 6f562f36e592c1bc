"""The values an agent run hands out (the requests its router and finalizer see, its trace entries, its result, its
context) are complete values, equal to what their constructors build from the same facts: every field set, equal,
printed, pickled and copied the same. Observed from outside: what a router, a finalizer and a worker receive, and
the result. (A run builds each through its constructor: ``tests/plan/test_plan_seam.py`` refuses ``object.__new__``
anywhere in ``src/``.)"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from routegate import RoutingAgent
from routegate.core import (
    AgentResult,
    Budget,
    FinalizeRequest,
    RouteDecision,
    RouteRequest,
    RunContext,
    TicketArgs,
    TraceEntry,
    worker,
)
from routegate.core.contracts import DelegationLedger

GOAL = "User Anna asks: can I get a refund for my pro_monthly subscription?"


class RecordingRouter:
    def __init__(self) -> None:
        self.requests: list[RouteRequest] = []

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.requests.append(request)
        target = "first" if request.attempt == 1 else "second"
        return RouteDecision({"kind": "route", "target": target, "args": {"ticket": request.goal}}, "script", None, "")


class RecordingFinalizer:
    def __init__(self, answer: str = "  the answer  ") -> None:
        self.requests: list[FinalizeRequest] = []
        self.answer = answer

    async def finalize(self, request: FinalizeRequest) -> str:
        self.requests.append(request)
        return self.answer


def make_agent(finalizer: RecordingFinalizer) -> tuple[RoutingAgent, RecordingRouter, list[RunContext[Any]]]:
    contexts: list[RunContext[Any]] = []

    @worker(args=TicketArgs, name="first", inline=True)
    def first(ticket: str) -> dict[str, Any]:
        return {"status": "needs_reroute", "domain": "billing"}

    @worker(args=TicketArgs, name="second", inline=True)
    def second(ticket: str, ctx: RunContext[Any]) -> dict[str, Any]:
        contexts.append(ctx)
        return {"status": "done", "domain": "billing", "result": {"len": len(ticket)}}

    router = RecordingRouter()
    agent = RoutingAgent(workers=[first, second], router=router, finalizer=finalizer, budget=Budget(max_delegations=5))
    return agent, router, contexts


def assert_same_value(built: Any, expected: Any) -> None:
    """``built`` is ``expected`` field for field, and behaves as a value the same way."""
    assert type(built) is type(expected)
    assert built == expected
    assert repr(built) == repr(expected)
    assert pickle.loads(pickle.dumps(built)) == expected
    assert dataclasses.replace(built) == expected
    assert dataclasses.astuple(built) == dataclasses.astuple(expected)


def test_the_router_and_the_finalizer_see_the_requests_their_constructors_build() -> None:
    finalizer = RecordingFinalizer()
    agent, router, _ = make_agent(finalizer)
    result = agent.run(GOAL, context={"tenant": "acme"}, deps=None)
    assert result.ok and result.output == "the answer"

    first, second = router.requests
    budget = agent.budget
    catalog = agent.catalog
    assert_same_value(
        first, RouteRequest(GOAL, catalog, (), frozenset(), 1, budget, {"tenant": "acme"}, (), None, None)
    )
    assert_same_value(
        second,
        RouteRequest(GOAL, catalog, (result.history[0],), frozenset({"first"}), 2, budget, {"tenant": "acme"}),
    )
    (request,) = finalizer.requests
    assert_same_value(request, FinalizeRequest(GOAL, "second", result.history, {"tenant": "acme"}, None))
    assert request.observation == {"status": "done", "domain": "billing", "result": {"len": len(GOAL)}}
    # mutable as before: a router may keep and change what it was given
    first.attempt = 7
    assert first.attempt == 7


def test_the_trace_entries_are_the_ones_the_constructor_builds() -> None:
    agent, _, _ = make_agent(RecordingFinalizer())
    result = agent.run(GOAL)
    digest = result.trace[0].args_hash
    assert isinstance(digest, str) and len(digest) == 12
    for entry, (attempt, target, status) in zip(
        result.trace, [(1, "first", "needs_reroute"), (2, "second", "done")], strict=True
    ):
        expected = TraceEntry(
            attempt,
            target,
            True,
            "delegate",
            entry.elapsed_ms,
            digest,
            observation_status=status,
            domain="billing",
            decided_by="script",
        )
        assert_same_value(entry, expected)
        assert entry.next is None and entry.provenance is None
        assert entry.to_dict() == expected.to_dict()


def test_the_result_of_a_successful_run_has_every_field_its_constructor_sets() -> None:
    agent, _, _ = make_agent(RecordingFinalizer())
    result = agent.run(GOAL)
    expected = AgentResult(
        result.outcome,
        "the answer",
        result.trace,
        result.run_id,
        result.elapsed_ms,
        GOAL,
        "second",
        result.history,
        result.history[-1].route,
    )
    slots = [name for cls in type(result).__mro__ for name in getattr(cls, "__slots__", ())]
    assert slots  # the fields are slots: each one must be set, or reading it raises
    for name in slots:
        assert getattr(result, name) == getattr(expected, name), name
    assert result.to_dict() == expected.to_dict()
    assert repr(result) == repr(expected)
    assert pickle.loads(pickle.dumps(result)).to_dict() == expected.to_dict()


@pytest.mark.parametrize("answer", ["", "   "])
def test_a_stop_in_the_finalize_step_still_reports_the_route(answer: str) -> None:
    agent, _, _ = make_agent(RecordingFinalizer(answer))
    result = agent.run(GOAL)
    assert (result.stop_reason, result.phase) == ("llm_empty", "finalize")
    assert result.route == result.history[-1].route
    assert result.to_dict()["route"]["target"] == "second"


def test_the_context_a_run_starts_is_the_one_its_constructor_builds() -> None:
    agent, _, contexts = make_agent(RecordingFinalizer())
    deps = {"db": "the caller's"}
    agent.run(GOAL, deps=deps)
    agent.run(GOAL, deps=deps)
    first, second = contexts
    fields = [f.name for f in dataclasses.fields(RunContext)]
    expected = RunContext(
        deps,
        first.run_id,
        first.deadline,
        DelegationLedger(5, 2, set(first.ledger.seen)),
        None,
        None,
        None,
    )
    for name in fields:
        assert getattr(first, name) == getattr(expected, name), name
    assert first.run_id != second.run_id and first.ledger is not second.ledger
    assert len(first.ledger.seen) == 2
    assert dataclasses.replace(first).run_id == first.run_id
    started = RunContext.start(deps, Budget(max_delegations=2), run_id="fixed")
    assert (started.run_id, started.ledger, started.provenance) == ("fixed", DelegationLedger(2), None)
    assert 0 < started.remaining() <= 60.0


def test_a_subclass_of_the_context_still_runs_its_own_init() -> None:
    """``RunContext.start`` of a subclass runs the subclass's own ``__init__``."""
    from routegate.core import Budget, RunContext

    seen: list[str] = []

    class Tagged(RunContext[str]):
        def __init__(self, *args: object, **kwargs: object) -> None:
            seen.append("init")
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    ctx = Tagged.start("deps", Budget(max_seconds=5, max_delegations=2), run_id="r1")
    assert seen == ["init"] and type(ctx) is Tagged
    assert (ctx.deps, ctx.run_id, ctx.ledger.max_delegations) == ("deps", "r1", 2)
    plain = RunContext.start("deps", Budget(max_seconds=5, max_delegations=2), run_id="r1")
    assert (plain.deps, plain.run_id, plain.ledger.max_delegations) == ("deps", "r1", 2)
