"""OpenTelemetry spans of desk turns that do not succeed: the turn, its Plan and the step where it stopped all say
so. (A successful turn's tree, streamed through ``ask``, is in ``test_support_graph.py``.)"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from routegate.apps.support.contracts import ROUTES
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.graph import RouterStep, ToolStep, support_plan
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import QueryArgs
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core import Budget, RouteGateway, RoutePolicy, Worker
from routegate.core.governed import GovernedStep
from routegate.embed import MiniLMEncoder
from support.hung_nodes import hang_vector

pytestmark = pytest.mark.integration

SESSION = "span-session-7"


@pytest.fixture
async def desk(db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> SupportAgent:
    agent = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await agent.start()
    return agent


def _plan_with(desk: SupportAgent, *, policy: RoutePolicy | None = None, gateway: RouteGateway | None = None) -> Any:
    assert desk.router is not None and desk.gateway is not None
    step = GovernedStep(
        policy or RoutePolicy(ROUTES, dict.fromkeys(ROUTES, QueryArgs)), gateway or desk.gateway, statuses=("done",)
    )
    return support_plan(router=RouterStep(desk.router, step), tool=ToolStep(step), respond=RespondNode())


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def the(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (found,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return found


def step(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (found,) = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "routegate.step" and attributes(s)["routegate.step"] == name
    ]
    return found


def assert_stopped(span: ReadableSpan, stop_reason: str) -> None:
    assert attributes(span)["routegate.stop_reason"] == stop_reason
    assert span.status.status_code is StatusCode.ERROR and span.status.description == stop_reason


def no_text(exporter: InMemorySpanExporter, *texts: str) -> bool:
    recorded = str([(s.attributes, s.status.description) for s in exporter.get_finished_spans()])
    return not any(text in recorded for text in texts)


async def test_a_refused_route_stops_the_turn_at_the_router_step(
    desk: SupportAgent, otel_spans: InMemorySpanExporter
) -> None:
    desk._plan = _plan_with(desk, policy=RoutePolicy(["POSTGRES", "VECTOR", "EXTERNAL"]))
    result = await desk.ask("What can you do?", session_id=SESSION)
    stop = "invalid_route:route_not_allowed:LLM"
    assert result.stop_reason == stop
    turn = the(otel_spans, "routegate.turn")
    assert_stopped(turn, stop)
    assert attributes(turn)["routegate.phase"] == "route"
    assert_stopped(the(otel_spans, "routegate.plan"), stop)
    assert_stopped(step(otel_spans, "router"), stop)
    assert_stopped(the(otel_spans, "routegate.policy"), stop)
    assert not [s for s in otel_spans.get_finished_spans() if s.name == "routegate.delegate"]
    assert no_text(otel_spans, "What can you do", SESSION)


async def test_a_denied_tool_stops_the_turn_at_the_tool_step(
    desk: SupportAgent, otel_spans: InMemorySpanExporter
) -> None:
    assert desk.gateway is not None
    desk._plan = _plan_with(desk, gateway=RouteGateway(allow=["POSTGRES"], registry=desk.gateway.workers))
    result = await desk.ask("How do I reset my password?", session_id=SESSION)
    assert result.stop_reason == "route_denied:VECTOR"
    for span in (the(otel_spans, "routegate.turn"), step(otel_spans, "VECTOR"), the(otel_spans, "routegate.delegate")):
        assert_stopped(span, "route_denied:VECTOR")
    assert attributes(step(otel_spans, "router"))["routegate.next"] == "VECTOR"


async def test_a_tool_that_raises_is_recorded_by_its_stop_reason_only(
    desk: SupportAgent, otel_spans: InMemorySpanExporter
) -> None:
    assert desk.gateway is not None

    def broken(query: str) -> dict[str, Any]:
        raise ValueError(f"cannot search for {query}")

    workers = [w for w in desk.gateway.workers.values() if w.name != "VECTOR"]
    gateway = RouteGateway(allow=list(ROUTES), registry=[*workers, Worker(name="VECTOR", fn=broken, inline=True)])
    desk._plan = _plan_with(desk, gateway=gateway)
    result = await desk.ask("How do I reset my password?", session_id=SESSION)
    assert result.stop_reason == "route_error:VECTOR"
    for span in (the(otel_spans, "routegate.turn"), step(otel_spans, "VECTOR"), the(otel_spans, "routegate.delegate")):
        assert_stopped(span, "route_error:VECTOR")
    assert no_text(otel_spans, "reset my password", "cannot search")


async def test_the_deadline_ends_the_turn_and_every_span_in_it(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, otel_spans: InMemorySpanExporter
) -> None:
    # the rules decide at once; the VECTOR tool never answers: the plan's deadline cuts it off
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, budget=Budget(1, 1, max_seconds=1.0))
    await desk.start()
    hang_vector(desk)
    final = await desk.run_turn(desk.new_turn("How do I reset my password?", session_id=SESSION))
    assert (final.stop_reason, final.phase) == ("max_seconds", "delegate")
    assert_stopped(the(otel_spans, "routegate.turn"), "max_seconds")
    assert attributes(the(otel_spans, "routegate.turn"))["routegate.phase"] == "delegate"
    assert attributes(step(otel_spans, "router"))["routegate.next"] == "VECTOR"
    # the plan's own deadline stopped it: the plan's span and the cut-off step's say so
    assert_stopped(the(otel_spans, "routegate.plan"), "max_seconds")
    assert step(otel_spans, "VECTOR").end_time is not None
