"""OpenTelemetry spans of a routing run, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from core._scripted import ListRouter, route
from routegate.core import Budget, RouteDecision, RouteRequest, TicketArgs, telemetry, worker
from routegate.core.events import FinalEvent
from routegate.errors import RunStopError
from routegate.plan import RoutingAgent

SECRET = "my card number is 4111 1111 1111 1111"


@pytest.fixture
def spans(otel_spans: InMemorySpanExporter) -> InMemorySpanExporter:
    return otel_spans


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    found = exporter.get_finished_spans()
    names = [s.name for s in found]
    assert len(names) == len(set(names)), names
    return {s.name: s for s in found}


@worker(args=TicketArgs, inline=True)
def billing(ticket: str) -> dict[str, Any]:
    tracer = telemetry.tracer()  # the test's provider (an application would use its own tracer)
    assert tracer is not None
    with tracer.start_as_current_span("worker.lookup"):
        return {"status": "done", "domain": "billing", "result": {"n": 1}}


class ScoredRouter:
    async def decide(self, request: RouteRequest) -> RouteDecision:
        return RouteDecision(route("billing", request.goal), "semantic", {"billing": 0.9, "tech": 0.6, "other": 0.1})


def test_without_a_provider_there_is_no_tracer() -> None:
    telemetry.use_tracer_provider(None)
    if trace.get_tracer_provider().__class__.__name__ == "ProxyTracerProvider":
        assert telemetry.tracer() is None


async def test_a_run_is_one_span_tree_with_the_routing_attributes(spans: InMemorySpanExporter) -> None:
    result = await RoutingAgent(workers=[billing], router=ScoredRouter()).arun(SECRET)
    assert result.ok
    tree = by_name(spans)
    assert set(tree) == {
        "routegate.run",
        "routegate.route",
        "routegate.policy",
        "routegate.delegate",
        "routegate.finalize",
        "worker.lookup",
    }
    root = tree["routegate.run"]
    assert root.parent is None
    for name in ("routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"):
        assert tree[name].parent is not None and tree[name].parent.span_id == root.context.span_id, name
    worker_span = tree["worker.lookup"]
    assert worker_span.parent is not None and worker_span.parent.span_id == tree["routegate.delegate"].context.span_id
    assert root.attributes is not None
    assert dict(root.attributes) == {
        "routegate.runtime": "agent",
        "routegate.run_id": result.run_id,
        "routegate.stop_reason": "success",
        "routegate.route": "billing",
        "routegate.attempts": 1,
        "routegate.delegations": 1,
    }
    decided = tree["routegate.route"].attributes or {}
    assert decided["routegate.router.layer"] == "semantic"
    assert decided["routegate.router.score"] == pytest.approx(0.9)
    assert decided["routegate.router.margin"] == pytest.approx(0.3)
    assert decided["routegate.router.runner_up"] == "tech"
    delegated = tree["routegate.delegate"].attributes or {}
    assert delegated["routegate.target"] == "billing"
    assert delegated["routegate.observation_status"] == "done"
    assert delegated["routegate.attempt"] == 1
    everything = " ".join(str(v) for s in spans.get_finished_spans() for v in (s.attributes or {}).values())
    assert "4111" not in everything  # message text is never recorded


async def test_a_refused_decision_marks_the_policy_span_and_the_root(spans: InMemorySpanExporter) -> None:
    result = await RoutingAgent(workers=[billing], router=ListRouter([route("nowhere")])).arun("hi")
    tree = by_name(spans)
    assert "routegate.delegate" not in tree
    for name in ("routegate.policy", "routegate.run"):
        attributes = tree[name].attributes or {}
        assert attributes["routegate.stop_reason"] == result.stop_reason == "invalid_route:route_not_allowed:nowhere"
        assert tree[name].status.status_code is StatusCode.ERROR
    assert (tree["routegate.run"].attributes or {})["routegate.phase"] == "route"


async def test_a_worker_that_raises_and_a_timeout_are_recorded(spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs, inline=True)
    def broken(ticket: str) -> dict[str, Any]:
        raise ValueError("boom")

    failed = await RoutingAgent(workers=[broken], router=ListRouter([route("broken")])).arun("hi")
    tree = by_name(spans)
    assert (tree["routegate.delegate"].attributes or {})["routegate.stop_reason"] == failed.stop_reason
    assert failed.stop_reason == "route_error:broken"
    spans.clear()

    @worker(args=TicketArgs)
    async def hangs(ticket: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}  # pragma: no cover - never reached

    agent = RoutingAgent(workers=[hangs], router=ListRouter([route("hangs")]), budget=Budget(max_seconds=0.05))
    timed_out = await agent.arun("hi")
    tree = by_name(spans)
    assert timed_out.stop_reason == "max_seconds"
    assert (tree["routegate.run"].attributes or {})["routegate.stop_reason"] == "max_seconds"
    assert "routegate.delegate" in tree  # the cut-off delegation's span is ended too


async def test_a_streamed_run_has_the_same_tree(spans: InMemorySpanExporter) -> None:
    events = [e async for e in RoutingAgent(workers=[billing], router=ScoredRouter()).iter("hi")]
    assert isinstance(events[-1], FinalEvent)
    assert {"routegate.run", "routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"} <= set(
        by_name(spans)
    )


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_sync_run_has_the_same_tree_and_leaves_no_context_behind(spans: InMemorySpanExporter) -> None:
    result = RoutingAgent(workers=[billing], router=ScoredRouter()).run(SECRET)
    assert result.ok
    tree = by_name(spans)
    assert attributes(tree["routegate.run"])["routegate.stop_reason"] == "success"
    assert tree["routegate.delegate"].parent is not None
    assert tree["routegate.delegate"].parent.span_id == tree["routegate.run"].context.span_id
    assert not trace.get_current_span().get_span_context().is_valid


async def test_a_reroute_is_a_second_attempt_under_the_same_root(spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs, inline=True)
    def first(ticket: str) -> dict[str, Any]:
        return {"status": "needs_reroute", "domain": "first"}

    agent = RoutingAgent(workers=[first, billing], router=ListRouter([route("first"), route("billing")]))
    result = await agent.arun("hi")
    assert result.ok and result.selected_route == "billing"
    found = spans.get_finished_spans()
    (root,) = [s for s in found if s.name == "routegate.run"]
    assert attributes(root)["routegate.attempts"] == 2 and attributes(root)["routegate.delegations"] == 2
    delegated = sorted((s for s in found if s.name == "routegate.delegate"), key=lambda s: s.start_time or 0)
    assert [(attributes(s)["routegate.attempt"], attributes(s)["routegate.observation_status"]) for s in delegated] == [
        (1, "needs_reroute"),
        (2, "done"),
    ]
    assert sorted(attributes(s)["routegate.attempt"] for s in found if s.name == "routegate.route") == [1, 2]
    governed = [s for s in found if s.name.startswith("routegate.") and s is not root]
    assert len(governed) == 7  # route, policy, delegate twice; finalize once
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in governed)


async def test_a_router_that_raises_marks_the_route_span_by_type_only(spans: InMemorySpanExporter) -> None:
    class Broken:
        async def decide(self, request: RouteRequest) -> RouteDecision:
            raise KeyError(f"no route for {request.goal}")

    result = await RoutingAgent(workers=[billing], router=Broken()).arun(SECRET)
    assert result.stop_reason == "router_error:KeyError"
    tree = by_name(spans)
    routed = tree["routegate.route"]
    assert attributes(routed)["error.type"] == "KeyError"
    assert routed.status.status_code is StatusCode.ERROR and routed.status.description == "KeyError"
    assert attributes(tree["routegate.run"])["routegate.stop_reason"] == "router_error:KeyError"
    assert attributes(tree["routegate.run"])["routegate.phase"] == "route"
    assert "4111" not in str([(s.attributes, s.status.description) for s in spans.get_finished_spans()])


async def test_a_worker_that_raises_marks_the_delegate_span_and_the_root(spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs, inline=True)
    def broken(ticket: str) -> dict[str, Any]:
        raise ValueError(f"boom: {ticket}")

    result = await RoutingAgent(workers=[broken], router=ListRouter([route("broken", SECRET)])).arun("hi")
    tree = by_name(spans)
    for name in ("routegate.delegate", "routegate.run"):
        assert attributes(tree[name])["routegate.stop_reason"] == result.stop_reason == "route_error:broken"
        assert tree[name].status.status_code is StatusCode.ERROR
    assert attributes(tree["routegate.run"])["routegate.phase"] == "delegate"
    assert "finalize" not in " ".join(tree)
    assert "4111" not in str([(s.attributes, s.status.description) for s in spans.get_finished_spans()])


async def test_a_streamed_run_records_the_same_attributes(spans: InMemorySpanExporter) -> None:
    agent = RoutingAgent(workers=[billing], router=ScoredRouter())
    events = [e async for e in agent.iter(SECRET)]
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.result.ok
    tree = by_name(spans)
    assert attributes(tree["routegate.run"])["routegate.run_id"] == final.result.run_id
    assert attributes(tree["routegate.run"])["routegate.stop_reason"] == "success"
    assert attributes(tree["routegate.route"])["routegate.router.runner_up"] == "tech"
    for name in ("routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"):
        assert tree[name].parent is not None and tree[name].parent.span_id == tree["routegate.run"].context.span_id


async def test_a_stream_closed_early_ends_every_span_it_opened(spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs)
    async def slow(ticket: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}  # pragma: no cover - never reached

    stream = RoutingAgent(workers=[slow], router=ListRouter([route("slow")])).iter("hi")
    async for _event in stream:  # the first event: the route was decided; the worker now waits forever
        break
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator: closing cancels the run
    names = {s.name for s in spans.get_finished_spans()}
    assert {"routegate.run", "routegate.route", "routegate.policy", "routegate.delegate"} <= names
    assert "routegate.finalize" not in names
    assert not trace.get_current_span().get_span_context().is_valid


async def test_the_run_stop_signal_marks_the_span_it_leaves_with_its_stop_reason(spans: InMemorySpanExporter) -> None:
    class Refusing:
        async def decide(self, request: RouteRequest) -> RouteDecision:
            raise RunStopError("custom_stop:refused", "the router refused")

    @worker(args=TicketArgs, inline=True)
    def stopping(ticket: str) -> dict[str, Any]:
        raise RunStopError("custom_stop:worker", "the worker stopped the run")

    refused = await RoutingAgent(workers=[billing], router=Refusing()).arun("hi")
    assert refused.stop_reason == "custom_stop:refused"
    tree = by_name(spans)
    assert attributes(tree["routegate.route"])["routegate.stop_reason"] == "custom_stop:refused"
    assert "error.type" not in attributes(tree["routegate.route"])  # a stop, not a fault
    spans.clear()

    stopped = await RoutingAgent(workers=[stopping], router=ListRouter([route("stopping")])).arun("hi")
    assert stopped.stop_reason == "custom_stop:worker"
    tree = by_name(spans)
    for name in ("routegate.delegate", "routegate.run"):
        assert attributes(tree[name])["routegate.stop_reason"] == "custom_stop:worker"
        assert tree[name].status.status_code is StatusCode.ERROR


async def test_a_bad_observation_is_recorded_on_the_delegate_span(spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs, inline=True)
    def odd(ticket: str) -> dict[str, Any]:
        return {"status": "weird"}

    result = await RoutingAgent(workers=[odd], router=ListRouter([route("odd")])).arun("hi")
    assert result.stop_reason.startswith("route_bad_observation")
    delegated = by_name(spans)["routegate.delegate"]
    assert attributes(delegated)["routegate.observation_status"] == "weird"
    assert attributes(delegated)["routegate.stop_reason"] == result.stop_reason
    assert delegated.status.status_code is StatusCode.ERROR
