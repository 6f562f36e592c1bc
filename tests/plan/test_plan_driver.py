"""The one driver behind ``arun``, ``run`` and ``iter``: every door gives the same run, ``run`` refuses a running
loop before anything starts, a step's context carries the run's tracer whatever the budget, and the checkpoint
code sees the plan only through its typed shape."""

from __future__ import annotations

from typing import Any

import grimp
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from routegate.core import Budget, FinalEvent, RunContext, telemetry
from routegate.errors import ConfigurationError
from routegate.plan import Envelope, Plan, Step, Store, when


def classify(text: str) -> dict[str, str]:
    return {"severity": "urgent" if "down" in text else "normal", "text": text}


async def apage(ticket: dict[str, str]) -> str:
    return f"paged: {ticket['text']}"


def triage(*, use_async: bool, **options: Any) -> Plan:
    return Plan(
        Step(
            classify, name="classify", routes={"page": when.field("severity").equals("urgent")}, after_branches="done"
        ),
        Step(apage if use_async else (lambda ticket: f"paged: {ticket['text']}"), name="page"),
        Step(lambda outcome: f"done: {outcome}", name="done"),
        **options,
    )


@pytest.mark.parametrize("use_async", [False, True], ids=["sync steps", "async steps"])
@pytest.mark.parametrize("budget", [None, Budget(max_seconds=30, max_iterations=10)], ids=["lean", "budget"])
async def test_every_door_runs_the_same_plan_to_the_same_result(use_async: bool, budget: Budget | None) -> None:
    plan = triage(use_async=use_async, budget=budget)
    awaited = await plan.arun("site down")
    streamed = [event async for event in plan.iter("site down")]
    final = streamed[-1]
    assert isinstance(final, FinalEvent)
    for result in (awaited, final.result):
        assert result.ok and result.output == "done: paged: site down"
        assert result.path == ("classify", "page", "done")
        assert [(e.target, e.next, e.why) for e in result.trace] == [
            ("classify", "page", "when.field('severity').equals('urgent')"),
            ("page", "done", "after_branches='done' of 'classify'"),
            ("done", None, "end"),
        ]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync steps", "async steps"])
async def test_run_inside_a_running_loop_is_refused_before_the_run_takes_anything(use_async: bool) -> None:
    store = Store()
    plan = triage(use_async=use_async, store=store, checkpoint_key="k", budget=Budget(max_seconds=30))
    with pytest.raises(ConfigurationError, match=r"^run\(\) was called from inside a running event loop; use 'await"):
        plan.run("site down")
    assert store.checkpoints.load("k") is None  # nothing was checkpointed
    result = await plan.arun("site down")  # the key's lease was never taken: the awaited run gets it
    assert result.ok and result.checkpoint_key == "k"


@pytest.mark.parametrize("budget", [None, Budget(max_seconds=30)], ids=["no budget", "budget"])
def test_a_step_context_carries_the_runs_tracer_with_or_without_a_budget(
    otel_spans: InMemorySpanExporter, budget: Budget | None
) -> None:
    seen: list[Tracer | None] = []

    def note(text: str, ctx: RunContext[None]) -> str:
        seen.append(ctx.tracer)
        return text

    assert Plan(Step(note), budget=budget).run("x").ok
    assert seen == [telemetry.tracer()] and seen[0] is not None


def test_without_a_tracer_provider_a_step_context_has_no_tracer() -> None:
    telemetry.use_tracer_provider(None)
    if telemetry.tracer() is not None:  # pragma: no cover - a global SDK provider installed by another test
        pytest.skip("a global tracer provider is installed in this process")
    seen: list[Tracer | None] = []

    def note(text: str, ctx: RunContext[None]) -> str:
        seen.append(ctx.tracer)
        return text

    assert Plan(Step(note), budget=Budget(max_seconds=30)).run("x").ok
    assert seen == [None]


def test_an_envelopes_metadata_is_one_dict_made_when_first_read() -> None:
    env = Envelope("payload", step="s")
    assert env.metadata == {} and env.metadata is env.metadata
    env.metadata["note"] = 1
    assert env.metadata == {"note": 1} and env.to_dict()["metadata"] == {"note": 1}
    assert "metadata" not in Envelope("payload").to_dict()
    given = {"plan": "x"}
    assert Envelope(metadata=given).metadata is given


def test_the_checkpoint_code_reads_the_plan_through_its_shape_only() -> None:
    graph = grimp.build_graph("routegate")
    for module in ("routegate.plan.durable", "routegate.plan._validate"):
        imported = graph.find_modules_directly_imported_by(module)
        assert "routegate.plan._compiled" not in imported, module
        assert "routegate.plan.plan" not in imported, module
        assert "routegate.plan._shape" in imported, module


async def test_a_deadline_stop_reports_the_phase_of_the_step_it_cut_off() -> None:
    """A routing runtime built as a plan names its steps' phases: the one deadline handler reports the phase of
    the step the timer cut off (and of the step about to run when the deadline passed between steps)."""
    import asyncio

    async def hang(value: str) -> str:
        await asyncio.Event().wait()  # never set: only the deadline ends this step
        return value

    plan = Plan(
        Step(lambda text: text, name="route", phase="route"),
        Step(hang, name="work", phase="delegate"),
        budget=Budget(max_seconds=0.05),
    )
    result = await plan.arun("x")
    assert (result.stop_reason, result.phase) == ("max_seconds", "delegate")
    assert result.path == ("route", "work") and "step 'work' was cut off" in result.message
    assert (await Plan(Step(hang, name="plain"), budget=Budget(max_seconds=0.05)).arun("x")).phase == "step"


def test_a_step_phase_outside_the_runtime_phases_is_refused_when_the_plan_is_built() -> None:
    from routegate.plan import PlanCompileError

    with pytest.raises(PlanCompileError, match=r"Step 'x': phase= must be one of route, delegate, finalize, step"):
        Step(lambda v: v, name="x", phase="validate")  # type: ignore[arg-type]
