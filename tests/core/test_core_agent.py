"""The routing agent end to end: every stop reason of the seed, the seed's "What to try next" list,
real deadlines, and the event stream."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ConfigDict

from core._scripted import FixedFinalizer, ListRouter, route
from routegate.apps.triage import DEMO_GOAL, build_triage_agent
from routegate.core import (
    Budget,
    DecisionEvent,
    DelegationEvent,
    FinalEvent,
    FinalizeRequest,
    ObservationEvent,
    RouteDecision,
    RouteRequest,
    RunResult,
    TicketArgs,
    WorkerArgs,
    worker,
)
from routegate.core.workers import NormalizedText
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import RoutingAgent

REFUND = "refund for user_id=42, charged twice"


def triage(outputs: list[object], **kwargs: Any) -> tuple[RoutingAgent, ListRouter]:
    router = ListRouter(outputs)
    return build_triage_agent(router=router, **kwargs), router


def assert_stopped(result: RunResult, stop_reason: str, phase: str) -> None:
    assert result.status == "stopped", result.to_dict()
    assert result.stop_reason == stop_reason, result.to_dict()
    assert result.phase == phase
    assert result.message
    data = result.to_dict()
    assert data["stop_reason"] == stop_reason
    assert data["phase"] == phase


# -- success, the seed's goal and "What to try next" ----------------------------------------------------------------
def test_seed_goal_goes_to_billing_with_a_49_usd_refund_offline() -> None:
    result = build_triage_agent().run(DEMO_GOAL)
    assert result.ok and result.stop_reason == "success"
    assert result.selected_route == "billing_specialist"
    observation = result.history[-1].observation
    assert observation["result"]["refund_amount_usd"] == 49.0
    assert observation["result"]["currency"] == "USD"
    assert result.output is not None and "49.00" in result.output and "USD" in result.output
    (entry,) = result.trace
    assert entry.target == "billing_specialist" and entry.ok and entry.observation_status == "done"
    assert entry.domain == "billing" and entry.decided_by == "rules" and len(entry.args_hash or "") == 12


def test_technical_incident_goes_to_the_technical_specialist() -> None:
    result = build_triage_agent().run("Incident: the public API returns error 502 and latency spiked")
    assert result.ok and result.selected_route == "technical_specialist"
    assert result.history[-1].observation["result"]["incident_id"] == "INC-4021"


def test_removing_billing_from_the_policy_allowlist_gives_route_not_allowed() -> None:
    agent, _ = triage([route("billing_specialist")], policy_allow={"technical_specialist", "sales_specialist"})
    result = agent.run(REFUND)
    assert_stopped(result, "invalid_route:route_not_allowed:billing_specialist", "route")
    assert result.raw_route == route("billing_specialist")
    assert "billing_specialist" not in {spec.name for spec in agent.catalog}


def test_removing_billing_only_from_the_execution_allowlist_gives_route_denied() -> None:
    agent, _ = triage([route("billing_specialist")], execution_allow={"technical_specialist", "sales_specialist"})
    result = agent.run(REFUND)
    assert_stopped(result, "route_denied:billing_specialist", "delegate")
    assert result.trace[-1].stop_reason == "route_denied:billing_specialist"


def test_a_target_nobody_registered_gives_route_missing() -> None:
    names = {"billing_specialist", "technical_specialist", "sales_specialist", "ghost_specialist"}
    agent, _ = triage([route("ghost_specialist")], policy_allow=names, execution_allow=names)
    assert_stopped(agent.run(REFUND), "route_missing:ghost_specialist", "delegate")


def test_a_route_without_ticket_gives_missing_ticket_and_keeps_the_raw_route() -> None:
    raw = {"kind": "route", "target": "billing_specialist", "args": {}}
    agent, _ = triage([raw])
    result = agent.run(REFUND)
    assert_stopped(result, "invalid_route:missing_ticket", "route")
    assert result.to_dict()["raw_route"] == raw


def test_non_json_router_output_keeps_the_raw_text() -> None:
    agent, _ = triage(["Sure! I'd route this to billing."])
    result = agent.run(REFUND)
    assert_stopped(result, "invalid_route:non_json", "route")
    assert result.raw_route == "Sure! I'd route this to billing."


# -- reroute and the budgets ----------------------------------------------------------------------------------------
def test_needs_reroute_forbids_the_previous_target_and_the_next_route_succeeds() -> None:
    agent, router = triage([route("sales_specialist"), route("billing_specialist")])
    result = agent.run(REFUND)
    assert result.ok and result.selected_route == "billing_specialist"
    assert [e.observation_status for e in result.trace] == ["needs_reroute", "done"]
    assert router.requests[0].forbidden_targets == frozenset()
    assert router.requests[1].forbidden_targets == {"sales_specialist"}
    assert router.requests[1].state_summary()["last_observation_status"] == "needs_reroute"


def test_repeating_the_target_after_needs_reroute_is_refused() -> None:
    agent, _ = triage([route("sales_specialist"), route("sales_specialist")])
    result = agent.run(REFUND)
    assert_stopped(result, "invalid_route:repeat_target_after_reroute", "route")
    assert len(result.history) == 1


def test_max_route_attempts() -> None:
    agent, _ = triage(
        [route("sales_specialist", "hello"), route("billing_specialist", "hello")],
        budget=Budget(max_route_attempts=2, max_delegations=5),
    )
    result = agent.run("hello")
    assert_stopped(result, "max_route_attempts", "route")
    assert "max_route_attempts=2" in result.message


def test_max_delegations() -> None:
    outputs = [route(t, "hello") for t in ("billing_specialist", "sales_specialist", "technical_specialist")]
    agent, _ = triage(outputs, budget=Budget(max_route_attempts=5, max_delegations=2))
    result = agent.run("hello")
    assert_stopped(result, "max_delegations", "delegate")
    assert "max_delegations=2 reached after 2 calls" in result.message


def test_loop_detected_on_the_same_target_and_normalised_args() -> None:
    outputs = [
        route("billing_specialist", "hello there"),
        route("sales_specialist", "hello there"),
        route("billing_specialist", "  hello   there "),
    ]
    agent, _ = triage(outputs, budget=Budget(max_route_attempts=5, max_delegations=5))
    result = agent.run("hello there")
    assert_stopped(result, "loop_detected", "delegate")
    assert result.trace[0].args_hash == result.trace[-1].args_hash


# -- worker contract ------------------------------------------------------------------------------------------------
class LooseArgs(WorkerArgs):
    model_config = ConfigDict(extra="allow", frozen=True)
    ticket: NormalizedText


def make_agent(*workers: Any, outputs: list[object], **kwargs: Any) -> RoutingAgent:
    return RoutingAgent(workers=workers, router=ListRouter(outputs), **kwargs)


def test_arguments_that_do_not_fit_the_worker_signature_give_route_bad_args() -> None:
    @worker(args=LooseArgs)
    def strict(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"ticket": ticket}}

    agent = make_agent(
        strict,
        outputs=[
            route(
                "strict",
                "t",
            )
        ],
    )
    assert agent.run("t").ok
    agent = make_agent(strict, outputs=[{"kind": "route", "target": "strict", "args": {"ticket": "t", "priority": 1}}])
    assert_stopped(agent.run("t"), "route_bad_args:strict", "delegate")


def test_a_type_error_inside_a_worker_is_route_error_not_bad_args() -> None:
    @worker(args=TicketArgs)
    def buggy(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": ticket + 1}  # type: ignore[operator]  # the bug under test

    result = make_agent(buggy, outputs=[route("buggy")]).run("t")
    assert_stopped(result, "route_error:buggy", "delegate")
    assert "TypeError" in result.message


@pytest.mark.parametrize(
    ("returned", "received"),
    [({"status": "pending", "domain": "x"}, "pending"), ({"domain": "x"}, None), ("done", None), (None, None)],
)
def test_out_of_contract_observations(returned: object, received: object) -> None:
    @worker(args=TicketArgs, inline=True)
    def odd(ticket: str) -> object:
        return returned

    result = make_agent(odd, outputs=[route("odd")]).run("t")
    assert_stopped(result, "route_bad_observation", "delegate")
    data = result.to_dict()
    assert data["expected_statuses"] == ["needs_reroute", "done"]
    assert data["received_status"] == received
    assert data["bad_observation"] == returned


def test_async_workers_and_pydantic_observations() -> None:
    @worker(args=TicketArgs)
    async def lookup(ticket: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"status": "done", "domain": "async", "result": {"echo": ticket}}

    result = make_agent(lookup, outputs=[route("lookup", "  a   b ")]).run("a b")
    assert result.ok and result.history[0].observation["result"] == {"echo": "a b"}


def test_schema_is_derived_from_the_signature_when_not_given() -> None:
    @worker
    def orders(order_id: int, verbose: bool = False) -> dict[str, Any]:
        """Look up an order.

        Longer text that is not part of the description."""
        return {"status": "done", "result": {"order_id": order_id, "verbose": verbose}}

    assert orders.description == "Look up an order."
    agent = make_agent(orders, outputs=[{"kind": "route", "target": "orders", "args": {"verbose": True}}])
    assert_stopped(agent.run("where is my order"), "invalid_route:missing_order_id", "route")
    schema = agent.catalog[0].args_schema
    assert schema["required"] == ["order_id"]


# -- router / finalizer failures --------------------------------------------------------------------------------------
class StopRouter:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def decide(self, request: RouteRequest) -> RouteDecision:
        raise self.exc


def test_a_router_stop_signal_becomes_the_stop_reason() -> None:
    agent = build_triage_agent(router=StopRouter(RunStopError("llm_timeout", "no answer within 60s")))
    assert_stopped(agent.run(REFUND), "llm_timeout", "route")


def test_a_router_bug_is_a_stop_not_an_exception() -> None:
    agent = build_triage_agent(router=StopRouter(KeyError("boom")))
    assert_stopped(agent.run(REFUND), "router_error:KeyError", "route")


@pytest.mark.parametrize("answer", ["", "   \n", None])
def test_an_empty_final_answer_is_llm_empty(answer: object) -> None:
    agent, _ = triage([route("billing_specialist")], finalizer=FixedFinalizer(answer))
    result = agent.run(REFUND)
    assert_stopped(result, "llm_empty", "finalize")
    assert result.route is not None and result.route.target == "billing_specialist"


def test_a_finalizer_timeout_signal_has_phase_finalize() -> None:
    class TimeoutFinalizer:
        async def finalize(self, request: FinalizeRequest) -> str:
            raise RunStopError("llm_timeout")

    agent, _ = triage([route("billing_specialist")], finalizer=TimeoutFinalizer())
    assert_stopped(agent.run(REFUND), "llm_timeout", "finalize")


def test_empty_or_huge_goals_are_stops_not_errors() -> None:
    agent = build_triage_agent()
    assert_stopped(agent.run("   "), "invalid_goal:empty", "route")
    assert_stopped(agent.run("x" * 40_000), "invalid_goal:too_long", "route")


def test_the_goal_is_checked_by_the_one_message_rule_at_the_request_bound() -> None:
    from routegate.core.messages import MAX_REQUEST_CHARS
    from routegate.technique import TechniqueRouter

    agent = build_triage_agent()
    empty = agent.run("\t \n")
    assert (empty.stop_reason, empty.message) == ("invalid_goal:empty", "the request is empty: send a non-blank text")
    assert agent.run(None).stop_reason == "invalid_goal:empty"  # type: ignore[arg-type]  # what a caller may send
    long = agent.run("refund " * (MAX_REQUEST_CHARS // 7 + 1))
    assert (long.stop_reason, long.message) == (
        "invalid_goal:too_long",
        f"the request has {7 * (MAX_REQUEST_CHARS // 7 + 1)} characters, over {MAX_REQUEST_CHARS}",
    )
    assert agent.run("r" * MAX_REQUEST_CHARS).stop_reason != "invalid_goal:too_long"  # the bound itself is fine
    # what the message rule refuses everywhere (the CLI, the server, the desk) the agent refuses too
    nul = agent.run("refund\x00 my order")
    assert (nul.stop_reason, nul.phase) == ("invalid_goal:invalid_text", "route")
    assert nul.message == "the request contains a NUL character at position 6; send text without NUL characters"
    assert agent.run("refund \ud800").stop_reason == "invalid_goal:invalid_text"
    assert nul.trace == () and agent.run("refund my order").ok  # refused before any route
    # an A2A task (which becomes the receiving agent's goal) has the same bound
    task = '{"target_agent": "helper", "task_description": "%s"}'
    within = TechniqueRouter().classify("```json\n" + task % ("t" * MAX_REQUEST_CHARS) + "\n```")
    over = TechniqueRouter().classify("```json\n" + task % ("t" * (MAX_REQUEST_CHARS + 1)) + "\n```")
    assert [len(item.task_description) for item in within.a2a_requests] == [MAX_REQUEST_CHARS]
    assert over.a2a_requests == ()


# -- max_seconds is a real deadline ---------------------------------------------------------------------------------
FAST = Budget(max_route_attempts=3, max_delegations=3, max_seconds=0.2)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # release any worker thread the deadline abandoned


class HangingRouter:
    async def decide(self, request: RouteRequest) -> RouteDecision:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_hanging_router_is_cut_off() -> None:
    result = build_triage_agent(router=HangingRouter(), budget=FAST).run(REFUND)
    assert_stopped(result, "max_seconds", "route")
    assert "max_seconds=0.2" in result.message


def test_a_hanging_async_worker_is_cut_off() -> None:
    @worker(args=TicketArgs)
    async def stuck(ticket: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    assert_stopped(make_agent(stuck, outputs=[route("stuck")], budget=FAST).run("t"), "max_seconds", "delegate")


def test_a_blocking_sync_worker_is_cut_off(gate: threading.Event) -> None:
    @worker(args=TicketArgs)
    def blocking(ticket: str) -> dict[str, Any]:
        gate.wait(30)
        return {"status": "done"}

    assert_stopped(make_agent(blocking, outputs=[route("blocking")], budget=FAST).run("t"), "max_seconds", "delegate")


def test_a_hanging_finalizer_is_cut_off() -> None:
    class Hanging:
        async def finalize(self, request: FinalizeRequest) -> str:
            await asyncio.Event().wait()
            return "never"

    agent, _ = triage([route("billing_specialist")], finalizer=Hanging(), budget=FAST)
    assert_stopped(agent.run(REFUND), "max_seconds", "finalize")


# -- events, sync/async API ----------------------------------------------------------------------------------------
async def test_iter_yields_decision_delegation_observation_per_attempt_then_final() -> None:
    agent, _ = triage([route("sales_specialist"), route("billing_specialist")])
    events = [event async for event in agent.iter(REFUND)]
    kinds = [type(e) for e in events]
    assert kinds == [DecisionEvent, DelegationEvent, ObservationEvent] * 2 + [FinalEvent]
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.result.ok
    assert [e.to_dict()["type"] for e in events][-1] == "final"


async def test_iter_ends_with_final_on_a_stop_too() -> None:
    agent, _ = triage(["not json"])
    events = [event async for event in agent.iter(REFUND)]
    assert [type(e) for e in events] == [DecisionEvent, FinalEvent]
    assert isinstance(events[0], DecisionEvent) and events[0].rejection == "invalid_route:non_json"


async def test_astream_is_the_deprecated_name_of_iter() -> None:
    agent, _ = triage(["not json"])
    with pytest.warns(DeprecationWarning, match=r"^RoutingAgent\.astream is deprecated: call RoutingAgent\.iter"):
        stream = agent.astream(REFUND)
    events = [event async for event in stream]
    assert [type(e) for e in events] == [DecisionEvent, FinalEvent]


async def test_closing_the_stream_early_cancels_the_run() -> None:
    agent = build_triage_agent(router=HangingRouter())
    stream = agent.iter(REFUND)
    task = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await stream.aclose()
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert pending == []


async def test_sync_run_inside_an_event_loop_is_refused_clearly() -> None:
    with pytest.raises(ConfigurationError, match="await"):
        build_triage_agent().run(REFUND)


def test_sync_run_can_be_called_repeatedly() -> None:
    agent = build_triage_agent()
    assert [agent.run(DEMO_GOAL).selected_route for _ in range(3)] == ["billing_specialist"] * 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_route_attempts": 0},
        {"max_delegations": -1},
        {"max_seconds": 0},
        {"max_seconds": float("inf")},
        {"max_route_attempts": True},
    ],
)
def test_bad_budgets_are_refused_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="Budget"):
        Budget(**kwargs)


def test_a_router_without_decide_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="decide"):
        RoutingAgent(workers=[], router=object())  # type: ignore[arg-type]
