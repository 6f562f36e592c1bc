"""The desk's graph on the Plan engine: its declared shape, the path each route executes, and the core governance
(policy boundary, gateway, per-turn ledger, deadline) composed into its steps."""

from __future__ import annotations

from typing import Any

import pytest

from routegate.apps.support.contracts import ROUTES, AnswerToken, RouteChosen, TurnResult
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SUPPORT_BUDGET, SupportAgent
from routegate.apps.support.graph import RouterStep, ToolStep, support_plan
from routegate.apps.support.payloads import TurnState
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import QueryArgs
from routegate.apps.support.runtime import DeskRuntime
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core import Budget, RouteGateway, RoutePolicy
from routegate.core.governed import GovernedStep
from routegate.embed import MiniLMEncoder
from routegate.plan import Plan, Step
from support.hung_nodes import hang_vector
from support.turn_events import final_of

pytestmark = pytest.mark.integration


@pytest.fixture
async def desk(db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> SupportAgent:
    agent = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await agent.start()
    return agent


def _path(result: TurnResult) -> list[str]:
    return [entry["target"] for entry in result.notes if entry.get("node") == "plan"]


async def test_the_plan_has_the_declared_shape(desk: SupportAgent) -> None:
    plan = desk.plan
    assert plan.name == "support-desk"
    assert plan.step_names == ("router", "POSTGRES", "VECTOR", "EXTERNAL", "refused", "LLM")
    shape = [(s.name, s.routes_by, s.after_branches, s.route_targets) for s in plan.steps]
    assert shape == [
        ("router", "route", "LLM", (*ROUTES, "refused")),
        ("POSTGRES", None, None, ()),
        ("VECTOR", None, None, ()),
        ("EXTERNAL", None, None, ()),
        ("refused", None, None, ("router",)),  # a refusal handed back (on_refusal="observe"): the route back
        ("LLM", None, None, ()),
    ]
    assert plan.max_iterations == 3  # one route attempt: the router, a tool, Respond
    assert isinstance(plan.runtime, DeskRuntime) and desk.runtime is plan.runtime
    # the plan's run is the turn: the desk's budget is the plan's, and each step names its phase
    assert plan.budget is not None and plan.budget.max_seconds == SUPPORT_BUDGET.max_seconds
    assert [s.phase for s in plan.steps] == ["route", "delegate", "delegate", "delegate", "route", "finalize"]
    assert desk.gateway is not None and desk.gateway.allow == {"POSTGRES", "VECTOR", "EXTERNAL"}


@pytest.mark.parametrize(
    ("query", "route", "path", "fallback"),
    [
        ("What is the status of ticket 1?", "POSTGRES", ["router", "POSTGRES", "LLM"], None),
        ("What is the status of ticket 12?", "POSTGRES", ["router", "POSTGRES", "LLM"], "empty"),
        ("How do I reset my password?", "VECTOR", ["router", "VECTOR", "LLM"], None),
        ("How do I change my email address?", "VECTOR", ["router", "VECTOR", "LLM"], "empty"),
        ("What is the price of Bitcoin?", "EXTERNAL", ["router", "EXTERNAL", "LLM"], None),
        ("What is the price of Ethereum?", "EXTERNAL", ["router", "EXTERNAL", "LLM"], "empty"),
        ("What can you do?", "LLM", ["router", "LLM"], None),
    ],
)
async def test_each_route_executes_its_path(
    desk: SupportAgent, query: str, route: str, path: list[str], fallback: str | None
) -> None:
    result = await desk.ask(query, session_id="path")
    assert (result.route, result.stop_reason, result.fallback) == (route, "success", fallback)
    assert _path(result) == path
    steps = [entry for entry in result.notes if entry.get("node") == "plan"]
    assert steps[0]["next"] == route
    assert steps[0]["why"] == f"routes_by route={route!r}"
    assert all(entry["phase"] == "step" and entry["ok"] and entry["elapsed_ms"] >= 0 for entry in steps)
    delegations = [entry for entry in result.notes if entry.get("node") == "gateway"]
    if route == "LLM":
        assert delegations == []  # the direct route runs no tool
    else:
        assert [(d["target"], d["phase"], d["attempt"]) for d in delegations] == [(route, "delegate", 1)]
        tool = next(e for e in result.notes if e.get("node") in ("postgres", "vector", "external"))
        assert tool["fallback"] == fallback


async def test_the_router_entry_says_which_layer_decided_with_scores(desk: SupportAgent) -> None:
    result = await desk.ask("Explain ticket escalation", session_id="layer")
    assert result.notes[0]["node"] == "router"
    assert result.notes[0]["layer"] == "rules" and result.notes[0]["scores"]["rules:VECTOR"] >= 1


def _plan_with(desk: SupportAgent, *, policy: RoutePolicy | None = None, gateway: RouteGateway | None = None) -> Any:
    assert desk.router is not None and desk.gateway is not None
    step = GovernedStep(
        policy or RoutePolicy(ROUTES, dict.fromkeys(ROUTES, QueryArgs)), gateway or desk.gateway, statuses=("done",)
    )
    return support_plan(router=RouterStep(desk.router, step), tool=ToolStep(step), respond=RespondNode())


async def test_a_refused_decision_stops_at_the_policy_boundary(desk: SupportAgent) -> None:
    plan = _plan_with(desk, policy=RoutePolicy(["POSTGRES", "VECTOR", "EXTERNAL"]))
    turn = desk.new_turn("What can you do?", session_id="policy")
    result = await plan.runtime.arun(TurnState(turn), deps=turn)
    assert result.stop_reason == "invalid_route:route_not_allowed:LLM"
    assert _path(result) == ["router"]  # no tool step ran: nothing was delegated
    assert result.phase == "route" and result.answer.startswith("Sorry, I couldn't finish answering that")


async def test_the_gateway_applies_the_execution_allowlist(desk: SupportAgent) -> None:
    assert desk.gateway is not None
    narrow = RouteGateway(allow=["POSTGRES"], registry=desk.gateway.workers)
    desk._plan = _plan_with(desk, gateway=narrow)
    result = await desk.run_turn(desk.new_turn("How do I reset my password?", session_id="denied"))
    assert result.stop_reason == "route_denied:VECTOR"
    assert _path(result) == ["router", "VECTOR"]
    (gateway,) = [entry for entry in result.notes if entry.get("node") == "gateway"]
    assert gateway["stop_reason"] == "route_denied:VECTOR"


async def test_one_delegation_per_turn(desk: SupportAgent) -> None:
    """The run's ledger allows a turn one delegation: a second tool step in the same run is refused, and the next
    turn (a run of its own) delegates again."""
    assert desk.router is not None and desk.gateway is not None
    step = GovernedStep(RoutePolicy(ROUTES, dict.fromkeys(ROUTES, QueryArgs)), desk.gateway, statuses=("done",))
    tool = ToolStep(step)
    runtime = DeskRuntime()
    Plan(
        Step(RouterStep(desk.router, step), name="router", output=TurnState),
        Step(tool, name="POSTGRES"),
        Step(tool, name="again"),
        budget=SUPPORT_BUDGET,
        runtime=runtime,
    )
    turn = desk.new_turn("What is the status of ticket 1?", session_id="ledger")
    again = await runtime.arun(TurnState(turn), deps=turn)
    assert again.stop_reason == "max_delegations"
    assert _path(again) == ["router", "POSTGRES", "again"]
    assert (await desk.runtime.arun(TurnState(turn), deps=turn)).ok
    assert (await desk.runtime.arun(TurnState(turn), deps=turn)).ok


async def test_the_deadline_stops_the_turn_and_the_desk_answers_safely(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    # the rules decide at once; the VECTOR tool never answers: the plan's deadline cuts it off
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, budget=Budget(1, 1, max_seconds=1.0))
    await desk.start()
    hang_vector(desk)
    events = [e async for e in desk.iter("How do I reset my password?", session_id="deadline")]
    final = final_of(events)
    assert (final.route, final.stop_reason, final.fallback) == ("VECTOR", "max_seconds", "stopped:max_seconds")
    assert final.phase == "delegate" and "step 'VECTOR' was cut off" in final.message
    assert _path(final) == ["router", "VECTOR"]  # the engine's trace of the cut-off run
    assert isinstance(events[0], RouteChosen) and events[0].route == "VECTOR"
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == final.answer
    assert "max_seconds" in final.answer


async def test_a_stopped_turn_says_where_it_stopped(desk: SupportAgent) -> None:
    ok = await desk.ask("How do I reset my password?", session_id="outcome-ok")
    assert ok.outcome.ok and ok.phase is None and ok.message == ""
    saved = desk._plan
    desk._plan = _plan_with(desk, policy=RoutePolicy(["POSTGRES", "VECTOR", "EXTERNAL"]))
    try:
        stopped = await desk.ask("What can you do?", session_id="outcome-stop")
    finally:
        desk._plan = saved
    assert stopped.stop_reason == "invalid_route:route_not_allowed:LLM"
    assert stopped.outcome.ok is False
    assert stopped.phase == "route" == stopped.outcome.phase
    assert "not in the policy allowlist" in stopped.message


async def test_the_postgres_node_reads_the_conversation_from_its_run_context(desk: SupportAgent) -> None:
    assert desk.gateway is not None
    postgres = desk.gateway.workers["POSTGRES"]
    assert postgres.context_param == "run"  # declared, so the gateway passes the turn's context
    assert set(postgres.schema.model_json_schema()["properties"]) == {"query"}


async def test_a_turn_is_one_span_tree_without_its_text_or_session_id(desk: SupportAgent, otel_spans: Any) -> None:
    result = await desk.ask("What is the status of ticket 1?", session_id="span-session")
    assert result.route == "POSTGRES"
    finished = otel_spans.get_finished_spans()
    spans = {s.name: s for s in finished if s.name != "routegate.step"}
    steps = {(s.attributes or {})["routegate.step"]: s for s in finished if s.name == "routegate.step"}
    root = spans["routegate.turn"]
    attributes = dict(root.attributes or {})
    assert attributes["routegate.runtime"] == "desk"
    assert attributes["routegate.route"] == "POSTGRES" and attributes["routegate.stop_reason"] == "success"
    assert attributes["routegate.session_id"] != "span-session" and len(attributes["routegate.session_id"]) == 16

    def below(child: Any, parent: Any) -> None:
        assert child.parent is not None and child.parent.span_id == parent.context.span_id

    # the turn runs the desk's Plan: turn → plan → a span per step, the governed spans below their step
    below(spans["routegate.plan"], root)
    assert set(steps) == {"router", "POSTGRES", "LLM"}
    for step in steps.values():
        below(step, spans["routegate.plan"])
    assert (steps["router"].attributes or {})["routegate.next"] == "POSTGRES"
    below(spans["routegate.policy"], steps["router"])
    below(spans["routegate.delegate"], steps["POSTGRES"])
    everything = " ".join(str(v) for s in otel_spans.get_finished_spans() for v in (s.attributes or {}).values())
    assert "status of ticket" not in everything and "span-session" not in everything
