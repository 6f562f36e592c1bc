"""OpenTelemetry spans of technique dispatches that do not succeed, and of a dispatch inside a streamed run.

The successful dispatch's tree is in ``test_technique_kernel.py``; here: a refused part, a worker that raises, the
deadline, and a dispatch made by a ``technique_worker`` while a routing agent's run is being streamed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from routegate.core import Budget, FinalEvent, Worker, worker
from routegate.plan import RoutingAgent
from routegate.technique import ClassifiedOutput, OutputKind, TechniqueDispatcher, technique_worker
from routegate.technique.types import ToolCallRequest
from routegate.testing import ScriptedRouter
from technique._handlers import RecordingToolHandler

SECRET = "my card number is 4111 1111 1111 1111"
ALLOW = ["mcp:a/t0", "mcp:a/t1", "mcp:a/t2"]


def tools(*arguments: dict[str, Any]) -> ClassifiedOutput:
    calls = tuple(ToolCallRequest("a", f"t{i}", args) for i, args in enumerate(arguments))
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return sorted((s for s in exporter.get_finished_spans() if s.name == name), key=lambda s: s.start_time or 0)


def no_secret(exporter: InMemorySpanExporter) -> bool:
    return "4111" not in str([(s.attributes, s.status.description) for s in exporter.get_finished_spans()])


class Waiting(RecordingToolHandler):
    """Tool calls whose workers wait until cancelled."""

    def worker(self, target: str) -> Worker:
        async def wait(**args: Any) -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}  # pragma: no cover - never reached

        return Worker(name=target, fn=wait)


async def test_a_refused_part_stops_the_dispatch_before_any_part_runs(otel_spans: InMemorySpanExporter) -> None:
    handler = RecordingToolHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW)
    result = await dispatcher.adispatch(tools({"q": SECRET}, {"q": 2}, {"q": 3}, {"q": 4}))  # mcp:a/t3 is not allowed
    assert result.stop_reason == "invalid_route:route_not_allowed:mcp:a/t3" and handler.calls == []
    (root,) = named(otel_spans, "routegate.dispatch")
    assert attributes(root)["routegate.stop_reason"] == result.stop_reason
    assert attributes(root)["routegate.phase"] == "route" and attributes(root)["routegate.delegations"] == 0
    assert root.status.status_code is StatusCode.ERROR
    checked = named(otel_spans, "routegate.policy")
    assert [attributes(s)["routegate.attempt"] for s in checked] == [1, 2, 3, 4]
    assert attributes(checked[-1])["routegate.stop_reason"] == result.stop_reason
    assert checked[-1].status.status_code is StatusCode.ERROR
    assert not named(otel_spans, "routegate.delegate")  # all or none: nothing ran
    assert no_secret(otel_spans)


async def test_a_worker_that_raises_marks_its_delegate_span_and_the_root(otel_spans: InMemorySpanExporter) -> None:
    def broken(**args: Any) -> object:
        raise ValueError(f"cannot: {args}")

    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler(fn=broken)], allow=ALLOW)
    result = await dispatcher.adispatch(tools({"q": SECRET}))
    assert (result.stop_reason, result.phase) == ("route_error:mcp:a/t0", "delegate")
    (root,) = named(otel_spans, "routegate.dispatch")
    (delegated,) = named(otel_spans, "routegate.delegate")
    for span in (root, delegated):
        assert attributes(span)["routegate.stop_reason"] == "route_error:mcp:a/t0"
        assert span.status.status_code is StatusCode.ERROR
    assert delegated.parent is not None and delegated.parent.span_id == root.context.span_id
    assert no_secret(otel_spans)


async def test_the_deadline_ends_the_dispatch_and_the_cut_off_part(otel_spans: InMemorySpanExporter) -> None:
    dispatcher = TechniqueDispatcher(handlers=[Waiting()], allow=ALLOW, budget=Budget(max_seconds=0.05))
    result = await dispatcher.adispatch(tools({"q": 1}))
    assert (result.stop_reason, result.phase) == ("max_seconds", "delegate")
    (root,) = named(otel_spans, "routegate.dispatch")
    assert (
        attributes(root)["routegate.stop_reason"] == "max_seconds" and attributes(root)["routegate.phase"] == "delegate"
    )
    (cut,) = named(otel_spans, "routegate.delegate")  # ended too, though its worker never returned
    assert cut.parent is not None and cut.parent.span_id == root.context.span_id
    assert not trace.get_current_span().get_span_context().is_valid


async def test_a_dispatch_inside_a_streamed_run_hangs_below_the_delegation(otel_spans: InMemorySpanExporter) -> None:
    @worker
    def planner(ticket: str) -> dict[str, Any]:
        """Plans; asks for a tool."""
        return {"status": "done", "result": '<tool_call>{"name": "a.t0", "arguments": {"q": 1}}</tool_call>'}

    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler()], allow=["mcp:a/t0"])
    route = {"kind": "route", "target": "planner", "args": {"ticket": "plan it"}}
    agent = RoutingAgent(workers=[technique_worker(planner, dispatcher=dispatcher)], router=ScriptedRouter([route]))
    events = [event async for event in agent.iter("plan it")]
    assert isinstance(events[-1], FinalEvent) and events[-1].result.ok
    (run,) = named(otel_spans, "routegate.run")
    agent_delegation, dispatch_delegation = named(otel_spans, "routegate.delegate")
    (dispatch,) = named(otel_spans, "routegate.dispatch")
    assert agent_delegation.parent is not None and agent_delegation.parent.span_id == run.context.span_id
    assert dispatch.parent is not None and dispatch.parent.span_id == agent_delegation.context.span_id
    assert dispatch_delegation.parent is not None and dispatch_delegation.parent.span_id == dispatch.context.span_id
    assert attributes(dispatch)["routegate.run_id"] == attributes(run)["routegate.run_id"]  # the run's context
    assert attributes(dispatch)["routegate.stop_reason"] == "success"
