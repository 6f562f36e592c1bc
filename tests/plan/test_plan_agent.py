"""The routing agent is a prebuilt Plan: one run of ``agent.plan`` (route → govern → finalize) on the Plan's one
driver — its deadline stop names the phase of the step it cut off, its faults go through the plan's one fault
boundary, its spans are the agent's. Observed from outside: results, logs, spans."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import routegate.plan._run as plan_module  # the clock deadlines are read on
from routegate import RoutingAgent
from routegate.core import Budget, FinalizeRequest, RouteDecision, RouteRequest, RunContext, TicketArgs, worker
from routegate.errors import RunStopError
from routegate.plan import Plan, PlanCompileError, Step


async def wait_forever() -> None:
    await asyncio.Event().wait()  # never set: only a deadline (or a cancellation) ends this


class Router:
    def __init__(self, *, hang: bool = False, fault: Exception | None = None) -> None:
        self.hang, self.fault = hang, fault

    async def decide(self, request: RouteRequest) -> RouteDecision:
        if self.fault is not None:
            raise self.fault
        if self.hang:
            await wait_forever()
        return RouteDecision(raw={"kind": "route", "target": "billing", "args": {"ticket": request.goal}})


class Finalizer:
    def __init__(self, *, hang: bool = False, fault: Exception | None = None) -> None:
        self.hang, self.fault = hang, fault

    async def finalize(self, request: FinalizeRequest) -> str:
        if self.fault is not None:
            raise self.fault
        if self.hang:
            await wait_forever()
        return f"answered by {request.selected_route}"


def make_agent(*, router: Router | None = None, finalizer: Finalizer | None = None, slow: bool = False) -> RoutingAgent:
    @worker(args=TicketArgs, name="billing")
    async def billing(ticket: str) -> dict[str, Any]:
        if slow:
            await wait_forever()
        return {"status": "done", "result": {"ticket": ticket}}

    return RoutingAgent(
        workers=[billing],
        router=router or Router(),
        finalizer=finalizer or Finalizer(),
        budget=Budget(max_seconds=0.05),
        name="desk",
    )


def test_an_agents_run_is_one_run_of_its_prebuilt_plan() -> None:
    agent = make_agent()
    assert isinstance(agent.plan, Plan)
    assert agent.plan.step_names == ("route", "govern", "finalize") and agent.plan.name == "desk"
    result = agent.run("refund please")
    assert (result.ok, result.output, result.selected_route) == (True, "answered by billing", "billing")


def test_the_agents_plan_is_not_a_step_the_agent_is() -> None:
    agent = make_agent()
    with pytest.raises(PlanCompileError, match=r"is the plan of a RoutingAgent; make the RoutingAgent itself the step"):
        Plan(Step(agent.plan, name="desk"))
    assert Plan(Step(agent)).step_names == ("desk",)


@pytest.mark.parametrize(
    ("kwargs", "phase", "step"),
    [
        ({"router": Router(hang=True)}, "route", "route"),
        ({"slow": True}, "delegate", "govern"),
        ({"finalizer": Finalizer(hang=True)}, "finalize", "finalize"),
    ],
)
async def test_the_deadline_stops_the_run_in_the_phase_of_the_step_it_cut_off(
    kwargs: dict[str, Any], phase: str, step: str
) -> None:
    result = await make_agent(**kwargs).arun("refund please")
    assert (result.ok, result.stop_reason, result.phase) == (False, "max_seconds", phase)
    assert (
        result.message.startswith("max_seconds=0.05 reached after ") and f"step {step!r} was cut off" in result.message
    )
    assert result.route is None and result.output is None  # a cut-off step reports nothing beside the stop


@pytest.mark.parametrize(
    ("kwargs", "stop_reason", "phase", "message"),
    [
        (
            {"router": Router(fault=KeyError("4111 1111"))},
            "router_error:KeyError",
            "route",
            "the router raised KeyError",
        ),
        (
            {"finalizer": Finalizer(fault=ValueError("4111 1111"))},
            "finalize_error:ValueError",
            "finalize",
            "the finalizer raised ValueError",
        ),
    ],
)
def test_a_fault_of_the_router_or_finalizer_is_reported_by_its_class_through_the_plans_boundary(
    kwargs: dict[str, Any], stop_reason: str, phase: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="routegate.plan.envelope"):
        result = make_agent(**kwargs).run("refund please")
    assert (result.stop_reason, result.phase, result.message) == (stop_reason, phase, f"{message} (details in the log)")
    assert "4111" not in result.to_json()
    (logged,) = [r for r in caplog.records if r.name == "routegate.plan.envelope"]
    assert logged.exc_info is not None and "4111" in str(logged.exc_info[1])


def test_a_stop_signal_without_a_phase_gets_the_phase_of_its_step() -> None:
    result = make_agent(finalizer=Finalizer(fault=RunStopError("quota:used_up", "no quota left"))).run("refund")
    assert (result.stop_reason, result.phase, result.message) == ("quota:used_up", "finalize", "no quota left")
    assert result.route is not None and result.route.target == "billing"


async def test_an_agent_streams_its_own_events_and_no_step_events() -> None:
    events = [type(event).__name__ async for event in make_agent().iter("refund please")]
    assert events == ["DecisionEvent", "DelegationEvent", "ObservationEvent", "FinalEvent"]


async def test_an_agent_run_is_the_agents_span_tree_not_a_plans(otel_spans: InMemorySpanExporter) -> None:
    result = await make_agent().arun("refund please")
    found = otel_spans.get_finished_spans()
    names = sorted(s.name for s in found)
    assert names == sorted(
        ["routegate.run", "routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"]
    )
    (root,) = [s for s in found if s.name == "routegate.run"]
    assert dict(root.attributes or {})["routegate.run_id"] == result.run_id
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in found if s is not root)


# -- the interpreter's pathless branch: an untraced agent run keeps only the names of its steps ----------------------
# A traced run keeps its path (envelopes, decisions) as any plan run does; the two must end the same way, byte for byte.
@pytest.fixture(params=["untraced", "traced"])
def tracing(request: pytest.FixtureRequest) -> str:
    if request.param == "traced":
        request.getfixturevalue("otel_spans")
    return str(request.param)


async def test_a_deadline_found_between_steps_names_the_step_it_stopped_before_and_the_path_so_far(
    tracing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [0.0]
    monkeypatch.setattr(plan_module, "_monotonic", lambda: clock[0])

    @worker(args=TicketArgs, name="billing")
    async def billing(ticket: str, ctx: RunContext[Any]) -> dict[str, Any]:
        clock[0] = ctx.deadline + 1.0  # the deadline passes while the worker runs, without it ever waiting
        return {"status": "done", "result": {"ticket": ticket}}

    agent = RoutingAgent(workers=[billing], router=Router(), finalizer=Finalizer(), budget=Budget(max_seconds=0.05))
    result = await agent.arun("refund please")
    assert (result.stop_reason, result.phase, result.output) == ("max_seconds", "finalize", None)
    assert result.message == (
        "max_seconds=0.05 reached after 1.050s, before step 'finalize' ran (path so far: route → govern)"
    )
    assert [(entry.target, entry.ok) for entry in result.trace] == [("billing", True)] and len(result.history) == 1


@pytest.mark.parametrize(
    ("kwargs", "cut", "path"),
    [
        ({"router": Router(hang=True)}, "route", "(none)"),
        ({"slow": True}, "govern", "route"),
        ({"finalizer": Finalizer(hang=True)}, "finalize", "route → govern"),
    ],
)
async def test_the_timer_cut_off_names_the_step_it_cut_and_the_path_so_far(
    tracing: str, kwargs: dict[str, Any], cut: str, path: str
) -> None:
    result = await make_agent(**kwargs).arun("refund please")
    assert result.stop_reason == "max_seconds"
    assert result.message.startswith("max_seconds=0.05 reached after ")
    assert result.message.endswith(f"s; step {cut!r} was cut off (path so far: {path})")


async def test_a_reroute_ends_the_same_with_or_without_the_path(tracing: str) -> None:
    calls: list[str] = []

    @worker(args=TicketArgs, name="billing")
    async def billing(ticket: str) -> dict[str, Any]:
        calls.append("billing")
        return {"status": "needs_reroute", "domain": "billing"}

    @worker(args=TicketArgs, name="refunds")
    async def refunds(ticket: str) -> dict[str, Any]:
        calls.append("refunds")
        return {"status": "done", "domain": "refunds", "result": {"ticket": ticket}}

    class Rerouting:
        async def decide(self, request: RouteRequest) -> RouteDecision:
            target = "refunds" if request.forbidden_targets else "billing"
            return RouteDecision(raw={"kind": "route", "target": target, "args": {"ticket": request.goal}})

    agent = RoutingAgent(workers=[billing, refunds], router=Rerouting(), finalizer=Finalizer())
    result = await agent.arun("refund please")
    assert (result.ok, result.output, result.selected_route, calls) == (
        True,
        "answered by refunds",
        "refunds",
        ["billing", "refunds"],
    )
    assert [(e.attempt, e.target, e.ok, e.observation_status, e.domain) for e in result.trace] == [
        (1, "billing", True, "needs_reroute", "billing"),
        (2, "refunds", True, "done", "refunds"),
    ]
    assert [entry.route.target for entry in result.history] == ["billing", "refunds"]


async def test_a_returned_stop_ends_the_run_with_or_without_the_path(tracing: str) -> None:
    class Empty:
        async def finalize(self, request: FinalizeRequest) -> str:
            return "   "

    agent = RoutingAgent(workers=make_agent().gateway.workers.values(), router=Router(), finalizer=Empty())
    result = await agent.arun("refund please")
    assert (result.stop_reason, result.phase, result.message) == (
        "llm_empty",
        "finalize",
        "the finalizer returned an empty answer",
    )
    assert result.route is not None and result.route.target == "billing" and len(result.trace) == 1


# -- the driver's timer -----------------------------------------------------------------------------------------
async def test_a_timed_run_whose_first_steps_do_not_wait_is_still_cut_off_when_a_later_one_hangs() -> None:
    async def quick(text: str) -> str:
        return text

    async def hangs(text: str) -> str:
        await wait_forever()
        return text

    plan = Plan(Step(quick), Step(hangs, phase="delegate"), budget=Budget(max_seconds=0.05))
    result = await plan.arun("x")
    assert (result.stop_reason, result.phase, result.path) == ("max_seconds", "delegate", ("quick", "hangs"))


async def test_a_timed_run_that_never_waits_still_answers_to_its_deadline_between_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(plan_module, "_monotonic", lambda: clock[0])

    async def late(text: str, ctx: RunContext[Any]) -> str:
        clock[0] = ctx.deadline + 1.0  # the deadline passes while this step runs, without it ever waiting
        return text

    async def never(text: str) -> str:
        raise AssertionError("the deadline passed: this step must not run")

    plan = Plan(Step(late), Step(never, phase="finalize"), budget=Budget(max_seconds=5.0))
    result = await plan.arun("x")
    assert (result.stop_reason, result.phase, result.path) == ("max_seconds", "finalize", ("late",))
    assert "before step 'never' ran" in result.message


async def test_cancelling_a_timed_run_that_waits_cancels_its_step() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def quick(text: str) -> str:
        return text

    async def waits(text: str) -> str:
        started.set()
        try:
            await wait_forever()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return text

    task = asyncio.ensure_future(Plan(Step(quick), Step(waits), budget=Budget(max_seconds=60.0)).arun("x"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
