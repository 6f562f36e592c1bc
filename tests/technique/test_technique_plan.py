"""The dispatcher is a prebuilt Plan on the plan engine's one driver: a validate-all step, then a delegate-each step.

Checked from outside: the dispatcher's ``plan``, the plan engine's one log line per run, what the handlers' workers
received, how a run cut off by its deadline or broken by a handler ends, and the spans a traced dispatch opens.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from routegate import Plan, RunContext, Step
from routegate.core import Budget, Outcome, Worker
from routegate.core.policy import RouteRejection
from routegate.errors import RunStopError
from routegate.technique import ClassifiedOutput, OutputKind, TechniqueDispatcher
from routegate.technique.types import TechniqueItem, ToolCallRequest
from technique._handlers import McpToolHandler, RecordingToolHandler

ALLOW = [f"mcp:a/t{i}" for i in range(6)]
SECRET = "postgres://admin:hunter2@db.internal/prod"


def tools(*arguments: dict[str, Any]) -> ClassifiedOutput:
    calls = tuple(ToolCallRequest("a", f"t{i}", args) for i, args in enumerate(arguments))
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls)


def plan_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The plan engine's one log line per run (``plan <name> path=... stop_reason=...``), without the latency, on
    the dispatcher's own logger."""
    return [
        r.getMessage().rsplit(" latency_ms=", 1)[0]
        for r in caplog.records
        if r.name == "routegate.technique.dispatch" and r.getMessage().startswith("plan ")
    ]


# -- the structure -----------------------------------------------------------------------------------------------


def test_the_dispatcher_is_one_prebuilt_plan_validate_then_delegate() -> None:
    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler()], allow=ALLOW, budget=Budget(max_seconds=7))
    assert isinstance(dispatcher.plan, Plan)
    assert dispatcher.plan.step_names == ("validate", "delegate")
    assert dispatcher.plan.budget is dispatcher.budget  # max_seconds is the plan's budget
    plan = dispatcher.plan
    assert dispatcher.dispatch(tools({"q": 1})).ok and dispatcher.dispatch(tools({"q": 2})).ok
    assert dispatcher.plan is plan  # built once, in the constructor


def test_every_dispatch_is_a_run_of_that_plan(caplog: pytest.LogCaptureFixture) -> None:
    handler = RecordingToolHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW[:2])
    with caplog.at_level(logging.INFO, logger="routegate.technique.dispatch"):
        ran = dispatcher.dispatch(tools({"q": 1}, {"q": 2}))
        refused = dispatcher.dispatch(tools({"q": 1}, {"q": 2}, {"q": 3}))  # mcp:a/t2 is not allowed
    assert ran.ok and handler.calls == [{"q": 1}, {"q": 2}]
    assert refused.stop_reason == "invalid_route:route_not_allowed:mcp:a/t2"
    assert plan_lines(caplog) == [
        "plan dispatch path=validate>delegate stop_reason=success",
        "plan dispatch path=validate stop_reason=invalid_route:route_not_allowed:mcp:a/t2",  # nothing delegated
    ]


def test_prose_and_a_kind_without_a_handler_run_no_plan(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler()], allow=ALLOW)
    prose = ClassifiedOutput(OutputKind.PROSE, "just words")
    code = ClassifiedOutput(OutputKind.CODE_BLOCK, "", code_blocks=())
    with caplog.at_level(logging.INFO, logger="routegate.technique.dispatch"):
        assert dispatcher.dispatch(prose).outcome == Outcome.success()
        missing = dispatcher.dispatch(code)
    assert (missing.stop_reason, missing.phase) == ("route_missing:code_block", "route")
    assert plan_lines(caplog) == []


# -- the deadline: the plan's one handler, today's stop, phase and message ----------------------------------------


@dataclass
class Hanging(McpToolHandler):
    """Tool calls whose worker for ``mcp:a/t1`` waits until it is cancelled; the others answer at once."""

    ran: list[str]

    def worker(self, target: str) -> Worker:
        ran = self.ran

        async def work(**args: Any) -> dict[str, Any]:
            ran.append(target)
            if target == "mcp:a/t1":
                await asyncio.Event().wait()
            return {"ok": True}

        return Worker(name=target, fn=work)


async def test_the_deadline_during_delegation_stops_with_max_seconds_after_the_parts_that_ran() -> None:
    ran: list[str] = []
    dispatcher = TechniqueDispatcher(handlers=[Hanging(ran)], allow=ALLOW, budget=Budget(max_seconds=0.05))
    result = await dispatcher.adispatch(tools({"q": 0}, {"q": 1}, {"q": 2}))
    assert (result.stop_reason, result.phase) == ("max_seconds", "delegate")
    assert result.message == "max_seconds=0.05 reached after 1 part(s)"
    assert ran == ["mcp:a/t0", "mcp:a/t1"]  # the third part never started
    assert [(part.target, part.stop_reason) for part in result.output] == [("mcp:a/t0", "success")]
    assert [(entry.target, entry.ok) for entry in result.trace] == [("mcp:a/t0", True)]


@dataclass
class SlowChecker(RecordingToolHandler):
    """A handler whose own argument check (an MCP server's ``inputSchema``) never answers."""

    async def check_args(self, target: str, args: Any) -> RouteRejection | None:
        await asyncio.Event().wait()
        return None  # pragma: no cover - never reached


async def test_the_deadline_during_validation_stops_in_todays_phase_before_any_part_runs() -> None:
    handler = SlowChecker()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW, budget=Budget(max_seconds=0.05))
    result = await dispatcher.adispatch(tools({"q": 1}))
    assert result.outcome == Outcome(False, "max_seconds", "delegate", "max_seconds=0.05 reached after 0 part(s)")
    assert handler.calls == [] and result.output == ()


# -- faults: the plan's fault path, reported by class only ---------------------------------------------------------


class BrokenRoute(RecordingToolHandler):
    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        raise ConnectionError(f"could not reach {SECRET}")


class BrokenCheck(RecordingToolHandler):
    async def check_args(self, target: str, args: Any) -> RouteRejection | None:
        raise ConnectionError(f"could not reach {SECRET}")


class StoppingCheck(RecordingToolHandler):
    async def check_args(self, target: str, args: Any) -> RouteRejection | None:
        raise RunStopError("tool_unavailable:a", "the tool server is draining", phase="delegate")


@pytest.mark.parametrize("handler", [BrokenRoute(), BrokenCheck()], ids=["route raises", "check_args raises"])
async def test_a_fault_in_a_handler_is_reported_by_its_class_only(
    handler: RecordingToolHandler, caplog: pytest.LogCaptureFixture
) -> None:
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW)
    with caplog.at_level(logging.WARNING):
        result = await dispatcher.adispatch(tools({"q": 1}))
    assert result.outcome == Outcome(
        False, "route_error:tool_call", "route", "the tool_call dispatch raised ConnectionError (details in the log)"
    )
    assert handler.calls == []
    assert SECRET not in json.dumps(result.to_dict()) and SECRET not in repr(result.trace)
    assert SECRET in caplog.text  # the text and the traceback went to the log, through the one fault-to-stop conversion
    assert [r.name for r in caplog.records if r.levelno >= logging.WARNING] == ["routegate.technique.dispatch"]


async def test_a_handlers_stop_signal_during_validation_keeps_its_reason_in_phase_route() -> None:
    handler = StoppingCheck()
    result = await TechniqueDispatcher(handlers=[handler], allow=ALLOW).adispatch(tools({"q": 1}))
    assert result.outcome == Outcome(False, "tool_unavailable:a", "route", "the tool server is draining")
    assert handler.calls == [] and result.output == ()


# -- the spans: the dispatch's own root, no plan or step spans ----------------------------------------------------


async def test_a_traced_dispatch_opens_its_root_and_no_plan_spans(otel_spans: InMemorySpanExporter) -> None:
    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler()], allow=ALLOW)
    assert (await dispatcher.adispatch(tools({"q": 1}, {"q": 2}))).ok
    names = sorted(span.name for span in otel_spans.get_finished_spans())
    assert names == ["routegate.delegate"] * 2 + ["routegate.dispatch"] + ["routegate.policy"] * 2


# -- inside a plan run: the run's context ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Deps:
    tenant: str


class ContextRecorder(McpToolHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, object, int]] = []

    def worker(self, target: str) -> Worker:
        async def work(ctx: RunContext[Any], **args: Any) -> dict[str, Any]:
            self.seen.append((ctx.run_id, ctx.deps, ctx.ledger.max_delegations))
            return {"ok": True}

        return Worker(name=target, fn=work)


async def test_a_dispatch_inside_a_plan_run_uses_that_runs_context() -> None:
    handler = ContextRecorder()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW, budget=Budget(max_delegations=5))

    async def act(text: str, ctx: RunContext[Deps]) -> str:
        result = await dispatcher.adispatch(tools({"q": text}), context=ctx)
        return result.stop_reason

    outer: Plan[Deps, str] = Plan(Step(act, name="act"), budget=Budget(max_delegations=2))
    result = await outer.arun("hello", deps=Deps("acme"))
    assert result.output == "success"
    assert handler.seen == [(result.run_id, Deps("acme"), 5)]  # the run's id and deps; the dispatcher's ledger


# -- delegate-each, for any sequence of parts ----------------------------------------------------------------------

BEHAVIOURS = {
    "ok": ("success", ""),
    "fail": ("tool_error:mcp:a/t{i}", "the tool said no"),
    "raise": ("route_error:mcp:a/t{i}", "the handler for 'mcp:a/t{i}' raised ValueError (details in the log)"),
    "stop": ("custom_stop:now", "stopped by the worker"),
}


@dataclass
class Failed:
    """A handler's value that carries its own stop reason (as a sandbox run or a tool outcome does)."""

    stop_reason: str
    message: str


class Scripted(McpToolHandler):
    """Part ``i`` does what ``script[i]`` says."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.ran: list[int] = []

    def worker(self, target: str) -> Worker:
        index = int(target.rsplit("t", 1)[1])

        def work(**args: Any) -> object:
            self.ran.append(index)
            match self.script[index]:
                case "fail":
                    return Failed(f"tool_error:{target}", "the tool said no")
                case "raise":
                    raise ValueError("boom")
                case "stop":
                    raise RunStopError("custom_stop:now", "stopped by the worker")
            return {"ok": True}

        return Worker(name=target, fn=work, inline=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(BEHAVIOURS)), min_size=1, max_size=6))
def test_the_parts_run_in_order_until_the_first_that_does_not_succeed(script: list[str]) -> None:
    handler = Scripted(script)
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW, budget=Budget(max_delegations=6))
    result = dispatcher.dispatch(tools(*({"q": i} for i in range(len(script)))))
    first = next((i for i, what in enumerate(script) if what != "ok"), None)
    last = len(script) - 1 if first is None else first
    assert handler.ran == list(range(last + 1))
    assert len(result.output) == len(result.trace) == last + 1
    assert all(part.ok for part in result.output[:last])
    if first is None:
        assert result.outcome == Outcome.success()
    else:
        reason, message = (text.format(i=first) for text in BEHAVIOURS[script[first]])
        assert result.outcome == Outcome(False, reason, "delegate", message)
        assert result.output[-1].outcome == result.outcome


# -- an ending that stops the plan leaves nothing behind -------------------------------------------------------


@dataclass
class FailingTool(RecordingToolHandler):
    """``mcp:a/t1`` reports a failure of its own; the other tools succeed."""

    def worker(self, target: str) -> Worker:
        def work(**args: Any) -> object:
            return Failed("tool_error:mcp:a/t1", "no") if target == "mcp:a/t1" else {"ok": True}

        return Worker(name=target, fn=work, inline=True)


ENDINGS = {
    "refused output": (RecordingToolHandler(), tools({"q": 1}, {"q": 2}, {"q": 3})),  # mcp:a/t2 not allowed
    "failed part": (FailingTool(), tools({"q": 1}, {"q": 2})),
    "handler fault": (BrokenRoute(), tools({"q": 1})),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
async def test_a_stopped_dispatch_leaves_no_cycle_holding_its_output(ending: str) -> None:
    """A stop travels as an exception through the plan's steps; its traceback would hold their frames (and the
    output's parts, a hostile 20 MB argument included) in a cycle until the next collection."""
    handler, output = ENDINGS[ending]
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW[:2])
    assert not (await dispatcher.adispatch(output)).ok  # warm: the first run imports and caches
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            assert not (await dispatcher.adispatch(output)).ok
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_concurrent_dispatches_share_the_plan_not_their_runs() -> None:
    """One plan per dispatcher: two dispatches in flight at once each keep their own parts, outcomes and context."""
    both_started = asyncio.Event()
    started: list[str] = []

    class Meeting(McpToolHandler):
        def worker(self, target: str) -> Worker:
            async def work(ctx: RunContext[Any], **args: Any) -> dict[str, Any]:
                started.append(ctx.run_id)
                if len(started) == 2:
                    both_started.set()
                await both_started.wait()  # each dispatch is suspended inside its plan run until both are
                return {"ok": True}

            return Worker(name=target, fn=work)

    dispatcher = TechniqueDispatcher(handlers=[Meeting()], allow=ALLOW, budget=Budget(max_seconds=30))
    one, two = await asyncio.gather(
        dispatcher.adispatch(tools({"q": 1})), dispatcher.adispatch(tools({"q": 1}, {"q": 2}))
    )
    assert one.ok and two.ok and one.run_id != two.run_id
    assert [p.target for p in one.output] == ["mcp:a/t0"]
    assert [p.target for p in two.output] == ["mcp:a/t0", "mcp:a/t1"]
    assert sorted(started[:2]) == sorted([one.run_id, two.run_id])
