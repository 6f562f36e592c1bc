"""Nested runs have one semantics: a routing agent run as a plan's step is part of the plan's run, like a nested
plan — one run id, deadline, delegation ledger and tracer — and its stop fails the step with its own stop reason,
message and phase. Everything is observed from outside: results, traces, envelopes, events and spans."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from routegate.core import (
    AgentResult,
    Budget,
    FinalEvent,
    FinalizeRequest,
    RouteDecision,
    RouteRequest,
    RunContext,
    TicketArgs,
    worker,
)
from routegate.plan import Plan, RoutingAgent, Step, StepContext, StepEvent, Store, when
from routegate.plan.targets import AgentTarget


class ScriptedRouter:
    """Routes to ``targets[attempt - 1]`` with the goal as the ticket; records what it was asked."""

    def __init__(self, *targets: str) -> None:
        self.targets = targets
        self.requests: list[RouteRequest] = []

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.requests.append(request)
        target = self.targets[min(request.attempt, len(self.targets)) - 1]
        return RouteDecision(raw={"kind": "route", "target": target, "args": {"ticket": request.goal}})


class RecordingFinalizer:
    def __init__(self) -> None:
        self.requests: list[FinalizeRequest] = []

    async def finalize(self, request: FinalizeRequest) -> str:
        self.requests.append(request)
        return f"answered by {request.selected_route}"


@worker(args=TicketArgs, inline=True)
def billing(ticket: str) -> dict[str, Any]:
    return {"status": "done", "result": {"ticket": ticket}}


@worker(args=TicketArgs, inline=True)
def busy(ticket: str) -> dict[str, Any]:
    return {"status": "needs_reroute", "result": {}}


@worker(args=TicketArgs, inline=True)
def broken(ticket: str) -> dict[str, Any]:
    raise ValueError("the ledger file /srv/secret.db is locked")


def agent(*targets: str, budget: Budget | None = None, workers: list[Any] | None = None, **kw: Any) -> RoutingAgent:
    return RoutingAgent(
        workers=workers or [billing, busy, broken],
        router=ScriptedRouter(*targets),
        budget=budget or Budget(max_route_attempts=3, max_delegations=5, max_seconds=60.0),
        name="desk",
        **kw,
    )


# -- a stop fails the step ------------------------------------------------------------------------------------------
async def test_an_agent_that_stops_stops_the_plan_with_its_reason_and_phase() -> None:
    plan = Plan(Step(agent("broken")), Step(lambda run: "never", name="reply"))
    result = await plan.arun("refund please")
    assert (result.ok, result.stop_reason, result.phase) == (False, "route_error:broken", "delegate")
    assert result.message == "worker 'broken' raised ValueError (details in the log)"
    assert result.path == ("desk",)
    (entry,) = result.trace
    assert (entry.target, entry.ok, entry.stop_reason) == ("desk", False, "route_error:broken")
    stopped = result.envelope("desk").metadata["agent"]
    assert isinstance(stopped, AgentResult) and stopped.stop_reason == "route_error:broken"
    assert stopped.run_id == result.run_id
    assert "/srv/secret.db" not in str(result.to_dict())


async def test_an_agent_stop_can_be_routed_like_any_failed_step() -> None:
    seen: list[Any] = []

    def fallback(error: Any) -> str:
        seen.append(error)
        return f"fallback after {error.stop_reason} in {error.phase}"

    plan = Plan(
        Step(agent("nowhere"), routes={"fallback": when.errored(), "reply": ~when.errored()}, after_branches="end"),
        Step(lambda run: run.output, name="reply"),
        Step(fallback, name="fallback"),
        Step(lambda text: text, name="end"),
    )
    result = await plan.arun("refund please")
    assert result.ok and result.path == ("desk", "fallback", "end")
    assert result.output == "fallback after invalid_route:route_not_allowed:nowhere in route"
    assert result.trace[0].ok is False and result.trace[0].stop_reason == "invalid_route:route_not_allowed:nowhere"


async def test_an_agent_that_succeeds_is_the_steps_payload_and_gets_the_task_typed() -> None:
    finalizer = RecordingFinalizer()
    desk = agent("billing", finalizer=finalizer)
    result = await Plan(Step(desk, task="Answer the customer."), Step(lambda run: run.output, name="reply")).arun(
        {"ticket": "refund please"}
    )
    assert result.ok and result.output == "answered by billing"
    (request,) = desk.router.requests  # type: ignore[attr-defined]
    assert request.goal == '{"ticket": "refund please"}'  # the step's input, as text, is the goal
    assert request.task == "Answer the customer." and request.context == {}  # the task is typed, not a magic key
    assert finalizer.requests[0].task == "Answer the customer." and finalizer.requests[0].context == {}


async def test_an_agent_run_on_its_own_has_no_task() -> None:
    desk = agent("billing")
    assert (await desk.arun("refund please")).ok
    assert desk.router.requests[0].task is None  # type: ignore[attr-defined]


# -- one context ----------------------------------------------------------------------------------------------------
async def test_an_agent_step_shares_the_plans_run_id_deadline_and_deps() -> None:
    seen: dict[str, RunContext[Any]] = {}

    def before(text: str, ctx: RunContext[Any]) -> str:
        seen["plan"] = ctx
        return text

    @worker(args=TicketArgs, inline=True)
    def looking(ticket: str, ctx: RunContext[Any]) -> dict[str, Any]:
        seen["worker"] = ctx
        return {"status": "done", "result": {}}

    desk = agent("looking", workers=[looking])
    plan = Plan(Step(before, name="before"), Step(desk), budget=Budget(max_seconds=30.0))
    result = await plan.arun("refund please", deps={"tenant": "acme"})
    assert result.ok
    inner, outer = seen["worker"], seen["plan"]
    assert inner.run_id == outer.run_id == result.run_id == result.envelope("desk").payload.run_id
    assert inner.deadline == outer.deadline  # the time left of the plan's 30 s, not the agent's fresh 60 s
    assert inner.ledger is outer.ledger and inner.deps == {"tenant": "acme"}


async def test_an_agents_delegations_count_against_the_plans_max_delegations() -> None:
    # the agent's own budget would allow 5; the plan's allows 1, and the reroute is the second delegation
    plan = Plan(Step(agent("busy", "billing")), budget=Budget(max_delegations=1))
    result = await plan.arun("refund please")
    assert (result.stop_reason, result.phase) == ("max_delegations", "delegate")
    assert result.message == "max_delegations=1 reached after 1 calls"


async def test_delegations_of_earlier_steps_count_too() -> None:
    @worker(args=TicketArgs, inline=True)
    def spend(ticket: str, ctx: RunContext[Any]) -> dict[str, Any]:
        return {"status": "done", "result": {"delegations": ctx.ledger.delegations}}

    first, second = agent("spend", workers=[spend]), agent("spend", workers=[spend])
    plan = Plan(Step(first, name="first"), Step(second, name="second"), budget=Budget(max_delegations=1))
    result = await plan.arun("refund please")
    assert result.path == ("first", "second") and result.stop_reason == "max_delegations"


async def test_the_plans_deadline_cuts_off_a_slow_agent() -> None:
    never = asyncio.Event()

    @worker(args=TicketArgs)
    async def slow(ticket: str) -> dict[str, Any]:
        await never.wait()  # never set: only a deadline ends this
        return {"status": "done", "result": {}}

    plan = Plan(Step(agent("slow", workers=[slow])), budget=Budget(max_seconds=0.2))
    result = await plan.arun("refund please")  # the agent's own max_seconds is 60
    assert (result.stop_reason, result.phase) == ("max_seconds", "step")
    assert result.path == ("desk",) and result.trace[0].stop_reason == "max_seconds"
    assert "max_seconds=0.2" in result.message and "'desk' was cut off" in result.message


async def test_a_streamed_plan_shows_its_own_events_only() -> None:
    events = [event async for event in Plan(Step(agent("billing")), name="p").iter("refund please")]
    assert [type(event) for event in events] == [StepEvent, FinalEvent]
    assert events[-1].result.ok


# -- one trace ------------------------------------------------------------------------------------------------------
async def test_the_agents_span_is_under_the_plans_step_with_the_plans_run_id(otel_spans: InMemorySpanExporter) -> None:
    result = await Plan(Step(agent("billing")), name="outer").arun("refund please")
    assert result.ok
    finished = otel_spans.get_finished_spans()
    (root,) = [s for s in finished if s.name == "routegate.plan"]
    (step,) = [s for s in finished if s.name == "routegate.step"]
    (run,) = [s for s in finished if s.name == "routegate.run"]
    assert step.parent is not None and step.parent.span_id == root.context.span_id
    assert run.parent is not None and run.parent.span_id == step.context.span_id
    assert dict(run.attributes or {})["routegate.run_id"] == result.run_id
    assert run.context.trace_id == root.context.trace_id


async def test_an_agent_target_outside_a_plans_run_is_a_run_of_its_own_with_the_task() -> None:
    desk = agent("billing")
    result = await AgentTarget(desk).run_step("refund please", StepContext("desk", "Be brief.", None, None))
    assert result.ok and len(result.run_id) == 16
    assert desk.router.requests[0].task == "Be brief."  # type: ignore[attr-defined]


def test_a_durable_run_keeps_a_stopped_agents_step_and_answers_from_it() -> None:
    store = Store()
    plan = Plan(Step(agent("nowhere")), Step(lambda run: "never", name="reply"), checkpoint_key="k", store=store)
    first = plan.run("refund please")
    again = plan.run("refund please")  # the run ended: its checkpoint answers, nothing runs again
    for result in (first, again):
        assert (result.stop_reason, result.phase) == ("invalid_route:route_not_allowed:nowhere", "route")
        assert result.path == ("desk",)


async def test_the_loop_guard_sees_the_calls_of_earlier_agent_steps() -> None:
    first, second = agent("billing"), agent("billing")
    plan = Plan(Step(first, name="first"), Step(lambda run: "refund please", name="again"), Step(second, name="second"))
    result = await plan.arun("refund please")  # the same call twice in one run
    assert result.path == ("first", "again", "second")
    assert (result.stop_reason, result.phase) == ("loop_detected", "delegate")
