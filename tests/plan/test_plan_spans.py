"""OpenTelemetry spans of Plan runs, read back from the SDK's in-memory exporter: a ``routegate.plan`` root per
run with a ``routegate.step`` child per step, for every way of running a plan and every way a run ends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from routegate.core import Budget, FinalEvent, RouteDecision, RouteRequest, TicketArgs, telemetry, worker
from routegate.plan import Plan, PlanRuntimeError, RoutingAgent, Step, StepEvent, Store, interrupt, when
from routegate.plan import _spans as spans_module

SECRET = "my card number is 4111 1111 1111 1111"


def classify(text: str) -> dict[str, str]:
    return {"severity": "urgent" if "down" in text else "normal", "text": text}


def triage_plan(**options: Any) -> Plan:
    return Plan(
        Step(
            classify,
            name="classify",
            routes={
                "urgent": when.field("severity").equals("urgent"),
                "normal": when.field("severity").equals("normal"),
            },
            after_branches="archive",
        ),
        Step(lambda ticket: "paged", name="urgent"),
        Step(lambda ticket: "backlog", name="normal"),
        Step(lambda outcome: f"archived: {outcome}", name="archive"),
        name="triage",
        **options,
    )


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def the_root(exporter: InMemorySpanExporter) -> ReadableSpan:
    (root,) = [s for s in spans_named(exporter, "routegate.plan") if s.parent is None]
    return root


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    found = [
        s for s in exporter.get_finished_spans() if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def assert_triage_tree(exporter: InMemorySpanExporter) -> None:
    root = the_root(exporter)
    assert attributes(root) == {
        "routegate.runtime": "plan",
        "routegate.plan": "triage",
        "routegate.stop_reason": "success",
        "routegate.steps": 3,
        "routegate.iterations": 3,
    }
    assert root.status.status_code is StatusCode.UNSET
    steps = children(exporter, root)
    assert [s.name for s in steps] == ["routegate.step"] * 3
    assert [attributes(s) for s in steps] == [
        {"routegate.step": "classify", "routegate.iteration": 1, "routegate.next": "urgent"},
        {"routegate.step": "urgent", "routegate.iteration": 2, "routegate.next": "archive"},  # the rejoin
        {"routegate.step": "archive", "routegate.iteration": 3},
    ]
    everything = " ".join(str(v) for s in exporter.get_finished_spans() for v in attributes(s).values())
    assert "4111" not in everything and "down" not in everything  # no payload is ever recorded
    assert not trace.get_current_span().get_span_context().is_valid  # every span left the context


async def test_arun_is_a_plan_span_with_a_span_per_step(otel_spans: InMemorySpanExporter) -> None:
    result = await triage_plan().arun(f"site down: {SECRET}")
    assert result.ok and result.path == ("classify", "urgent", "archive")
    assert_triage_tree(otel_spans)


def test_run_drives_the_same_tree_without_a_loop(otel_spans: InMemorySpanExporter) -> None:
    assert triage_plan().run(f"site down: {SECRET}").ok
    assert_triage_tree(otel_spans)


async def test_a_streamed_run_has_the_same_tree(otel_spans: InMemorySpanExporter) -> None:
    plan = triage_plan()
    events = [event async for event in plan.iter(f"site down: {SECRET}")]
    assert [type(e) for e in events] == [StepEvent, StepEvent, StepEvent, FinalEvent]
    assert_triage_tree(otel_spans)
    otel_spans.clear()
    assert [event async for event in plan.iter(f"site down: {SECRET}")][-1].result.ok
    assert_triage_tree(otel_spans)


async def test_a_run_under_a_budget_and_a_context_has_the_same_tree(otel_spans: InMemorySpanExporter) -> None:
    plan = triage_plan(budget=Budget(max_seconds=30, max_iterations=10))
    assert (await plan.arun(f"site down: {SECRET}")).ok
    assert_triage_tree(otel_spans)


async def test_a_failed_step_marks_its_span_and_the_root(otel_spans: InMemorySpanExporter) -> None:
    def broken(text: str) -> str:
        raise ValueError(f"cannot parse {text}")

    result = await Plan(Step(broken, name="parse"), Step(str.upper, name="shout")).arun(SECRET)
    assert result.stop_reason == "step_error:ValueError"
    root = the_root(otel_spans)
    assert attributes(root)["routegate.stop_reason"] == "step_error:ValueError"
    assert attributes(root)["routegate.phase"] == "step"
    assert root.status.status_code is StatusCode.ERROR and root.status.description == "step_error:ValueError"
    (step,) = children(otel_spans, root)
    assert attributes(step) == {
        "routegate.step": "parse",
        "routegate.iteration": 1,
        "routegate.stop_reason": "step_error:ValueError",
    }
    assert step.status.status_code is StatusCode.ERROR
    assert "4111" not in str(step.status.description) + str(root.status.description)


async def test_a_routed_failure_marks_the_step_but_not_the_run(otel_spans: InMemorySpanExporter) -> None:
    def broken(text: str) -> str:
        raise ValueError("no")

    plan = Plan(
        Step(broken, name="parse", routes={"fallback": when.errored()}),
        Step(lambda error: "fallback", name="fallback"),
    )
    assert (await plan.arun("x")).ok
    root = the_root(otel_spans)
    assert attributes(root)["routegate.stop_reason"] == "success"
    failed, fallback = children(otel_spans, root)
    assert attributes(failed)["routegate.next"] == "fallback"
    assert failed.status.status_code is StatusCode.ERROR
    assert fallback.status.status_code is StatusCode.UNSET


async def test_a_timeout_ends_the_cut_off_step_span(otel_spans: InMemorySpanExporter) -> None:
    async def hangs(text: str) -> str:
        await asyncio.Event().wait()
        return text  # pragma: no cover - never reached

    plan = Plan(Step(str.upper, name="first"), Step(hangs, name="hangs"), budget=Budget(max_seconds=0.05))
    result = await plan.arun("x")
    assert result.stop_reason == "max_seconds"
    root = the_root(otel_spans)
    assert attributes(root)["routegate.stop_reason"] == "max_seconds"
    assert attributes(root)["routegate.iterations"] == 2
    first, cut = children(otel_spans, root)
    assert attributes(first)["routegate.step"] == "first" and first.status.status_code is StatusCode.UNSET
    assert attributes(cut)["routegate.step"] == "hangs"
    assert attributes(cut)["routegate.stop_reason"] == "max_seconds"
    assert not trace.get_current_span().get_span_context().is_valid


async def test_a_loop_stops_at_max_iterations_with_the_budget_used(otel_spans: InMemorySpanExporter) -> None:
    plan = Plan(Step(lambda x: x, name="again", routes={"again": when.payload(lambda _: True)}), max_iterations=4)
    result = await plan.arun(1)
    assert result.stop_reason == "max_iterations"
    root = the_root(otel_spans)
    assert attributes(root)["routegate.iterations"] == 4 and attributes(root)["routegate.steps"] == 4
    steps = children(otel_spans, root)
    assert [attributes(s)["routegate.iteration"] for s in steps] == [1, 2, 3, 4]
    assert all(attributes(s)["routegate.next"] == "again" for s in steps)


async def test_a_plan_bug_still_ends_every_span(otel_spans: InMemorySpanExporter) -> None:
    def bad(envelope: Any) -> bool:
        raise KeyError("predicate bug")

    plan = Plan(Step(lambda x: x, name="a", routes={"b": bad}), Step(lambda x: x, name="b"))
    with pytest.raises(PlanRuntimeError):
        await plan.arun(1)
    root = the_root(otel_spans)
    (step,) = children(otel_spans, root)
    for span in (root, step):
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)["error.type"] == "PlanRuntimeError"
        assert "predicate bug" not in str(span.status.description)  # the type, never the message
    assert not trace.get_current_span().get_span_context().is_valid


async def test_a_step_that_runs_an_agent_holds_the_agents_tree(otel_spans: InMemorySpanExporter) -> None:
    @worker(args=TicketArgs, inline=True)
    def billing(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"refund": 1}}

    class Router:
        async def decide(self, request: RouteRequest) -> RouteDecision:
            return RouteDecision({"kind": "route", "target": "billing", "args": {"ticket": request.goal}}, "rules")

    agent = RoutingAgent(workers=[billing], router=Router())

    async def ask(text: str) -> str:
        return (await agent.arun(text)).output or ""

    assert (await Plan(Step(ask, name="ask")).arun("refund please")).ok
    (step,) = spans_named(otel_spans, "routegate.step")
    (run,) = spans_named(otel_spans, "routegate.run")
    assert run.parent is not None and run.parent.span_id == step.context.span_id
    assert step.parent is not None and step.parent.span_id == the_root(otel_spans).context.span_id


async def test_a_nested_plan_is_a_plan_span_below_its_step(otel_spans: InMemorySpanExporter) -> None:
    inner = Plan(Step(str.upper, name="shout"), name="inner")
    outer = Plan(Step(inner, name="nested"), Step(str.lower, name="whisper"), name="outer")
    assert (await outer.arun("x")).output == "x"
    root = the_root(otel_spans)
    nested, whisper = children(otel_spans, root)
    (inner_root,) = children(otel_spans, nested)
    assert inner_root.name == "routegate.plan" and attributes(inner_root)["routegate.plan"] == "inner"
    assert attributes(inner_root)["routegate.stop_reason"] == "success"
    (shout,) = children(otel_spans, inner_root)
    assert attributes(shout) == {"routegate.step": "shout", "routegate.iteration": 1}
    assert attributes(whisper)["routegate.iteration"] == 2


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_members_of_a_parallel_band_are_sibling_step_spans(
    otel_spans: InMemorySpanExporter, kind: str
) -> None:
    async def aright(x: int) -> int:
        return x + 2

    def right(x: int) -> int:
        return x + 2

    def broken(x: int) -> int:
        raise ValueError("no")

    plan = Plan(
        Step(lambda x: x + 1, name="left", parallel=True),
        Step(aright if kind == "async" else right, name="right", parallel=True),
        Step(lambda both: both, name="join"),
    )
    assert (await plan.arun(1)).output == {"left": 2, "right": 3}
    root = the_root(otel_spans)
    left, right_span, join = children(otel_spans, root)
    assert {attributes(left)["routegate.step"], attributes(right_span)["routegate.step"]} == {"left", "right"}
    assert attributes(left)["routegate.iteration"] == attributes(right_span)["routegate.iteration"] == 1
    assert attributes(join) == {"routegate.step": "join", "routegate.iteration": 2}
    otel_spans.clear()

    failing = Plan(Step(lambda x: x, name="ok", parallel=True), Step(broken, name="bad", parallel=True))
    assert (await failing.arun(1)).stop_reason == "step_error:ValueError"
    bad = next(s for s in spans_named(otel_spans, "routegate.step") if attributes(s)["routegate.step"] == "bad")
    assert attributes(bad)["routegate.stop_reason"] == "step_error:ValueError"


def test_a_resumed_durable_run_says_so_and_shows_the_steps_it_ran(otel_spans: InMemorySpanExporter) -> None:
    def approve(amount: int) -> str:
        return f"approved {interrupt({'refund': amount})}"

    plan = Plan(Step(lambda x: x, name="start"), Step(approve, name="approve"), store=Store(), checkpoint_key="k")
    first = plan.run(40)
    assert first.stop_reason == "interrupted"
    root = the_root(otel_spans)
    assert attributes(root)["routegate.resumed"] is False
    assert attributes(root)["routegate.stop_reason"] == "interrupted"
    assert [attributes(s)["routegate.step"] for s in children(otel_spans, root)] == ["start", "approve"]
    otel_spans.clear()

    second = plan.run(answer="yes")
    assert second.ok and second.output == "approved yes"
    root = the_root(otel_spans)
    assert attributes(root)["routegate.resumed"] is True
    assert attributes(root)["routegate.stop_reason"] == "success"
    assert attributes(root)["routegate.steps"] == 2  # the restored step counts; only the step that ran has a span
    (ran,) = children(otel_spans, root)
    assert attributes(ran) == {"routegate.step": "approve", "routegate.iteration": 2}
    otel_spans.clear()

    assert plan.run().output == "approved yes"  # finished: answered from the checkpoint, nothing runs
    root = the_root(otel_spans)
    assert attributes(root)["routegate.resumed"] is True and not children(otel_spans, root)


def test_without_a_tracer_provider_a_plan_opens_no_span(monkeypatch: pytest.MonkeyPatch) -> None:
    telemetry.use_tracer_provider(None)
    if telemetry.tracer() is not None:  # pragma: no cover - a global SDK provider installed by another test
        pytest.skip("a global tracer provider is installed in this process")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a span was opened without a tracer provider")

    for name in ("span", "open_span", "end_run"):  # every way the plan's spans open or end one
        monkeypatch.setattr(spans_module, name, refuse)
    assert triage_plan().run("site down").ok
    assert asyncio.run(triage_plan(budget=Budget(max_seconds=5)).arun("site down")).ok


async def test_a_stream_closed_early_ends_every_span_it_opened(otel_spans: InMemorySpanExporter) -> None:
    async def waits(text: str) -> str:
        await asyncio.Event().wait()
        return text  # pragma: no cover - never reached

    stream = Plan(Step(str.upper, name="first"), Step(waits, name="waits"), name="slow").iter("x")
    async for event in stream:  # the first step's event; the second step now waits forever
        assert isinstance(event, StepEvent)
        break
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator: closing cancels the run
    root = the_root(otel_spans)
    assert [attributes(s)["routegate.step"] for s in children(otel_spans, root)] == ["first", "waits"]
    assert "routegate.stop_reason" not in attributes(root)  # cancelled: the run did not end, it was abandoned
    assert not trace.get_current_span().get_span_context().is_valid
