"""Dispatch on the governance kernel: one RunContext per dispatch, the core Deadline, an Outcome on every ending.

Checked from outside the dispatcher: what a handler's worker received, what a result says, what a routing agent
around the dispatch reports.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from routegate.core import Budget, FinalizeRequest, Outcome, RunContext, Worker, worker
from routegate.errors import RunStopError
from routegate.plan import RoutingAgent
from routegate.technique import (
    ClassifiedOutput,
    DispatchResult,
    OutputKind,
    TechniqueDispatcher,
    TechniqueFinalizer,
    TechniqueRouter,
    technique_worker,
)
from routegate.technique.types import CodeBlock, TechniqueItem, ToolCallRequest
from routegate.testing import ScriptedRouter
from technique._handlers import RecordingToolHandler

ROUTER = TechniqueRouter()


@dataclass
class Seen:
    """What a worker that declares a RunContext was handed, copied at the call."""

    run_id: str
    deps: object
    remaining: float
    delegations: int
    max_delegations: int
    args: dict[str, Any]


@dataclass
class ContextHandler:
    """Tool calls to workers that declare a ``RunContext`` parameter and record what they were given."""

    seen: list[Seen] = field(default_factory=list)
    sync: bool = False
    sleep: float = 0.0
    kind: OutputKind = OutputKind.TOOL_CALL
    prefix: str = "mcp"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        assert isinstance(item, ToolCallRequest)
        return f"mcp:{item.qualified_name}", dict(item.arguments)

    def schema(self, target: str) -> type[BaseModel] | None:
        return None

    def record(self, ctx: RunContext[Any], args: dict[str, Any]) -> dict[str, Any]:
        ledger = ctx.ledger
        self.seen.append(Seen(ctx.run_id, ctx.deps, ctx.remaining(), ledger.delegations, ledger.max_delegations, args))
        return {"ok": True}

    def worker(self, target: str) -> Worker:
        if self.sync:

            def run_sync(ctx: RunContext[Any], **args: Any) -> dict[str, Any]:
                return self.record(ctx, args)

            return Worker(name=target, fn=run_sync)

        async def run(ctx: RunContext[Any], **args: Any) -> dict[str, Any]:
            if self.sleep:
                await asyncio.sleep(self.sleep)
            return self.record(ctx, args)

        return Worker(name=target, fn=run)


def _tools(*arguments: dict[str, Any]) -> ClassifiedOutput:
    calls = tuple(ToolCallRequest("a", f"t{i}", args) for i, args in enumerate(arguments))
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls)


ALLOW = ["mcp:a/t0", "mcp:a/t1", "mcp:a/t2"]


@pytest.mark.parametrize("sync", [False, True], ids=["async worker", "threaded sync worker"])
async def test_a_worker_that_declares_run_context_gets_the_dispatch_context(sync: bool) -> None:
    handler = ContextHandler(sync=sync)
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW, budget=Budget(max_seconds=30, max_delegations=3))
    before = time.monotonic()
    result = await dispatcher.adispatch(_tools({"q": 1}, {"q": 2}))
    after = time.monotonic()
    assert result.ok, result
    first, second = handler.seen
    assert (first.args, second.args) == ({"q": 1}, {"q": 2})  # the context is not an argument
    assert first.run_id == second.run_id and len(first.run_id) == 16  # one context per dispatch
    assert first.deps is None
    assert 30 - (after - before) <= first.remaining <= 30  # the dispatch's deadline: max_seconds from its start
    assert (first.delegations, second.delegations, first.max_delegations) == (1, 2, 3)  # the dispatch's ledger

    await dispatcher.adispatch(_tools({"q": 3}))
    assert handler.seen[2].run_id != first.run_id  # the next dispatch is another run
    assert handler.seen[2].delegations == 1


async def test_a_route_cannot_set_the_context_parameter() -> None:
    handler = ContextHandler()  # workers taking **args: the forged key is replaced by the real context
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW)
    result = await dispatcher.adispatch(_tools({"ctx": "forged", "q": 1}))
    assert result.ok, result
    assert handler.seen[0].args == {"q": 1}
    assert len(handler.seen[0].run_id) == 16  # the worker got a RunContext, not the string

    class Strict(RecordingToolHandler):
        """A worker with named parameters: ``ctx`` is not one a route may pass."""

        def worker(self, target: str) -> Worker:
            def run(ctx: RunContext[Any], q: int = 0) -> dict[str, Any]:
                self.calls.append({"ctx": ctx})
                return {"ok": True}

            return Worker(name=target, fn=run, inline=True)

    strict = Strict()
    dispatcher = TechniqueDispatcher(handlers=[strict], allow=ALLOW)
    result = await dispatcher.adispatch(_tools({"q": 1}, {"ctx": "forged"}))
    assert (result.stop_reason, result.phase) == ("route_bad_args:mcp:a/t1", "delegate")
    assert result.message == "worker 'mcp:a/t1': unexpected argument(s) ['ctx']"
    assert strict.calls == []  # all or none: nothing ran


async def test_the_deadline_cut_off_still_reports_max_seconds() -> None:
    handler = ContextHandler(sleep=30)
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW, budget=Budget(max_seconds=0.05))
    result = await dispatcher.adispatch(_tools({"q": 1}))
    assert (result.status, result.stop_reason, result.phase) == ("stopped", "max_seconds", "delegate")
    assert result.message == "max_seconds=0.05 reached after 0 part(s)"
    assert result.outcome == Outcome(False, "max_seconds", "delegate", result.message)


async def test_a_timeout_the_dispatch_did_not_set_is_a_fault_not_max_seconds() -> None:
    def late(**args: Any) -> object:
        raise TimeoutError("the handler's own clock")

    dispatcher = TechniqueDispatcher(handlers=[RecordingToolHandler(fn=late)], allow=ALLOW)
    result = await dispatcher.adispatch(_tools({"q": 1}))
    assert (result.stop_reason, result.phase) == ("route_error:mcp:a/t0", "delegate")


# -- .outcome on every kind of ending ------------------------------------------------------------------------------


@dataclass
class Ran:
    stop_reason: str = "success"
    message: str = ""


@dataclass
class CodeHandlerDouble:
    """Code blocks; what the worker does is chosen by the code's text."""

    kind: OutputKind = OutputKind.CODE_BLOCK
    prefix: str = "code"
    calls: list[str] = field(default_factory=list)

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        assert isinstance(item, CodeBlock)
        if item.code == "route raises":
            raise LookupError("bug in the handler's route")
        if item.code == "route stops":
            raise RunStopError("custom_stop:route", "the handler's route refused it")
        return f"code:{item.language}", {"code": item.code}

    def schema(self, target: str) -> type[BaseModel] | None:
        return None

    def worker(self, target: str) -> Worker | None:
        async def run(code: str) -> object:
            self.calls.append(code)
            match code:
                case "raise":
                    raise ValueError("boom")
                case "stop":
                    raise RunStopError("custom_stop:now", "stopped by the worker")
                case "fail":
                    return Ran("sandbox_exit:2", "exit code 2")
                case "echo a stop_reason key":
                    return {"stop_reason": "evil", "message": "not an attribute"}
            return Ran()

        return Worker(name=target, fn=run)


def _code(*blocks: str, language: str = "python") -> str:
    return "".join(f"```{language}\n{block}\n```\n" for block in blocks)


ENDINGS: dict[str, tuple[str, tuple[str, str | None, str]]] = {
    # name: (output, (stop_reason, phase, message))
    "prose": ("just words", ("success", None, "")),
    "success": (_code("a", "b"), ("success", None, "")),
    "a mapping's stop_reason key is not the part's": (_code("echo a stop_reason key"), ("success", None, "")),
    "policy refusal": (
        _code("x", language="bash"),
        ("invalid_route:route_not_allowed:code:bash", "route", "target 'code:bash' is not in the policy allowlist"),
    ),
    "gateway pre-check": (
        _code("x", language="ruby"),
        ("route_denied:code:ruby", "delegate", "target 'code:ruby' is not in the execution allowlist"),
    ),
    "loop": (_code("a", "a"), ("loop_detected", "delegate", "'code:python' is asked twice with the same arguments")),
    "budget": (
        _code("a", "b", "c", "d"),
        ("max_delegations", "delegate", "max_delegations=3, but the output has 4 parts"),
    ),
    "handler raised": (
        _code("raise"),
        (
            "route_error:code:python",
            "delegate",
            "the handler for 'code:python' raised ValueError (details in the log)",
        ),
    ),
    "handler's stop reason": (_code("a", "fail", "b"), ("sandbox_exit:2", "delegate", "exit code 2")),
    "stop signal": (_code("stop"), ("custom_stop:now", "delegate", "stopped by the worker")),
    "route raised": (
        _code("route raises"),
        ("route_error:code_block", "route", "the code_block dispatch raised LookupError (details in the log)"),
    ),
    "route stopped": (_code("route stops"), ("custom_stop:route", "route", "the handler's route refused it")),
    "no handler for the kind": (
        '<tool_call>{"name": "a.b", "arguments": {}}</tool_call>',
        ("route_missing:tool_call", "route", "no handler is registered for tool_call"),
    ),
}


@pytest.mark.parametrize("name", list(ENDINGS))
async def test_every_ending_has_an_outcome(name: str) -> None:
    text, (stop_reason, phase, message) = ENDINGS[name]
    dispatcher = TechniqueDispatcher(
        handlers=[CodeHandlerDouble()],
        allow=["code:python", "code:ruby"],
        execution_allow=["code:python"],
        budget=Budget(max_delegations=3),
    )
    result = await dispatcher.adispatch(ROUTER.classify(text))
    assert (result.stop_reason, result.phase, result.message) == (stop_reason, phase, message)
    ok = stop_reason == "success"
    expected = Outcome.success() if ok else Outcome(False, stop_reason, phase, message)  # type: ignore[arg-type]
    assert result.outcome == expected
    assert result.outcome.ok is result.ok is ok
    for part in result.output:  # each part's outcome mirrors its fields; only the last may have failed
        assert (part.outcome.ok, part.outcome.stop_reason, part.outcome.phase) == (
            part.ok,
            part.stop_reason,
            part.phase,
        )
    assert all(part.ok for part in result.output[:-1])
    if result.output and not ok:
        assert result.output[-1].outcome.stop_reason == stop_reason


# -- the run's context through technique_worker and TechniqueFinalizer -----------------------------------------


@dataclass(frozen=True)
class Deps:
    tenant: str


async def test_technique_worker_passes_the_run_context_to_its_worker_and_the_dispatch() -> None:
    seen_by_inner: list[tuple[str, object]] = []

    @worker
    def planner(ticket: str, ctx: RunContext[Deps]) -> dict[str, Any]:
        """Plans; asks for a tool."""
        seen_by_inner.append((ctx.run_id, ctx.deps))
        return {"status": "done", "result": '<tool_call>{"name": "a.t0", "arguments": {"q": 1}}</tool_call>'}

    handler = ContextHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=["mcp:a/t0"])
    wrapped = technique_worker(planner, dispatcher=dispatcher)
    assert set(wrapped.schema.model_fields) == {"ticket"}  # no context in the argument schema
    route = {"kind": "route", "target": "planner", "args": {"ticket": "plan it"}}
    agent = RoutingAgent(workers=[wrapped], router=ScriptedRouter([route]))
    result = await agent.arun("plan it", deps=Deps("acme"))
    assert result.stop_reason == "success", result
    assert seen_by_inner == [(result.run_id, Deps("acme"))]
    assert [(s.run_id, s.deps) for s in handler.seen] == [(result.run_id, Deps("acme"))]


async def test_technique_worker_outside_a_run_has_no_context_to_pass() -> None:
    @worker
    def planner(ticket: str) -> dict[str, Any]:
        """Plans."""
        return {"status": "done", "result": '<tool_call>{"name": "a.t0", "arguments": {}}</tool_call>'}

    handler = ContextHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=["mcp:a/t0"])
    value = await technique_worker(planner, dispatcher=dispatcher).invoke({"ticket": "x"})
    assert value["result"]["technique"]["stop_reason"] == "success"
    assert handler.seen[0].deps is None  # a dispatch of its own


async def test_technique_finalizer_passes_the_run_context_on() -> None:
    seen_by_inner: list[str] = []

    class ContextFinalizer:
        async def finalize(self, request: FinalizeRequest, ctx: RunContext[Deps]) -> str:
            seen_by_inner.append(ctx.run_id)
            return '<tool_call>{"name": "a.t0", "arguments": {}}</tool_call>'

    @worker
    def analyst(ticket: str) -> dict[str, Any]:
        """Answers."""
        return {"status": "done", "result": "42"}

    handler = ContextHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=["mcp:a/t0"])
    finalizer = TechniqueFinalizer(ContextFinalizer(), dispatcher=dispatcher)
    route = {"kind": "route", "target": "analyst", "args": {"ticket": "x"}}
    agent = RoutingAgent(workers=[analyst], router=ScriptedRouter([route]), finalizer=finalizer)
    result = await agent.arun("x", deps=Deps("acme"))
    assert result.stop_reason == "success", result
    assert seen_by_inner == [result.run_id]
    assert [(s.run_id, s.deps) for s in handler.seen] == [(result.run_id, Deps("acme"))]


def test_sync_dispatch_result_is_the_same_shape() -> None:
    dispatcher = TechniqueDispatcher(handlers=[ContextHandler()], allow=ALLOW)
    result: DispatchResult = dispatcher.dispatch(_tools({"q": 1}))
    assert result.outcome == Outcome.success()
    assert result.output[0].outcome.ok


async def test_a_dispatch_is_one_span_tree(otel_spans: Any) -> None:
    handler = ContextHandler()
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=ALLOW)
    result = await dispatcher.adispatch(_tools({"q": 1}, {"q": 2}))
    assert result.ok
    spans = {(s.name, (s.attributes or {}).get("routegate.attempt")): s for s in otel_spans.get_finished_spans()}
    root = spans[("routegate.dispatch", None)]
    assert dict(root.attributes or {}) == {
        "routegate.runtime": "dispatch",
        "routegate.run_id": handler.seen[0].run_id,
        "routegate.parts": 2,
        "routegate.output_kind": "tool_call",
        "routegate.stop_reason": "success",
        "routegate.delegations": 2,
    }
    for key in (("routegate.policy", 1), ("routegate.policy", 2), ("routegate.delegate", 1), ("routegate.delegate", 2)):
        assert spans[key].parent is not None and spans[key].parent.span_id == root.context.span_id, key
    refused = await dispatcher.adispatch(_tools({"q": 1}, {"q": 2}, {"q": 3}, {"q": 4}))  # mcp:a/t3 not allowed
    assert refused.stop_reason == "invalid_route:route_not_allowed:mcp:a/t3"
    last = [s for s in otel_spans.get_finished_spans() if s.name == "routegate.dispatch"][-1]
    assert (last.attributes or {})["routegate.stop_reason"] == refused.stop_reason
    assert (last.attributes or {})["routegate.phase"] == "route"
