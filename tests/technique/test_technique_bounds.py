"""Dispatch never raises and never half-runs: bounded arguments, all-or-none blocks, inputSchema, hidden errors.

The MCP cases run the real demo server (tests/technique/mcp_demo_server.py) with a call log: which calls
reached the server is read from that file, outside the dispatcher.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import ArgLimits, Budget, FinalizeRequest, worker
from routegate.core.policy import RouteRejection
from routegate.plan import RoutingAgent
from routegate.technique import (
    A2ADelegator,
    A2AHandler,
    A2ATask,
    ClassifiedOutput,
    InProcessEventBus,
    OutputKind,
    TechniqueDispatcher,
    TechniqueRouter,
    serve_agent,
)
from routegate.technique.agent import TechniqueFinalizer
from routegate.technique.tools import MCPServerConfig, MCPToolHandler, MCPToolPool, _ToolSchema
from routegate.technique.types import A2ARoutingRequest, ToolCallRequest
from routegate.testing import ScriptedRouter
from technique._handlers import RecordingToolHandler

SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))
ROUTER = TechniqueRouter()


def nested(depth: int, leaf: object = 1) -> dict[str, Any]:
    value: Any = leaf
    for _ in range(depth - 1):
        value = {"k": value}
    return {"k": value}


def tool_output(*calls: ToolCallRequest) -> ClassifiedOutput:
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls)


def a2a_output(*requests: A2ARoutingRequest) -> ClassifiedOutput:
    return ClassifiedOutput(OutputKind.A2A_REQUEST, "", a2a_requests=requests)


def logged_calls(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def call_log(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture
def demo(call_log: Path) -> MCPServerConfig:
    return MCPServerConfig("demo", command=sys.executable, args=(SERVER, str(call_log)), call_timeout=30)


# -- bounds: depth, keys, bytes, before hashing or sending --------------------------------------------------------


@pytest.mark.parametrize("depth", [300, 500, 10_000])
async def test_deep_tool_arguments_are_refused_before_the_server_sees_them(
    depth: int, demo: MCPServerConfig, call_log: Path
) -> None:
    async with MCPToolPool([demo]) as pool:
        dispatcher = TechniqueDispatcher(handlers=[MCPToolHandler(pool)], allow=["mcp:demo/echo", "mcp:demo/add"])
        started = time.perf_counter()
        result = await dispatcher.adispatch(tool_output(ToolCallRequest("demo", "echo", {"payload": nested(depth)})))
        assert (result.stop_reason, result.phase) == ("invalid_route:too_deep", "route")
        assert "max_depth=32" in result.message
        assert time.perf_counter() - started < 5  # not the 30 s call_timeout
        direct = await pool.call("demo", "echo", {"payload": nested(depth)})  # the pool bounds its own calls
        assert direct.stop_reason == "invalid_route:too_deep"
        assert (await pool.call("demo", "add", {"a": 1, "b": 2})).text == "3"  # the connection is fine
    assert [call["tool"] for call in logged_calls(call_log)] == ["add"]


async def test_a_call_that_breaks_the_connection_answers_at_once(demo: MCPServerConfig, call_log: Path) -> None:
    # with the bounds lifted, the SDK itself cannot serialise 500 levels: the session breaks
    async with MCPToolPool([demo], limits=ArgLimits(max_depth=4_000)) as pool:
        started = time.perf_counter()
        broken = await pool.call("demo", "echo", {"payload": nested(500)})
        assert broken.stop_reason == "tool_unavailable:demo"
        assert broken.message == "the call to 'echo' on MCP server 'demo' raised ValueError (details in the log)"
        assert time.perf_counter() - started < 10  # not the 30 s call_timeout
        assert (await pool.call("demo", "add", {"a": 1, "b": 2})).text == "3"  # a new connection
    assert [call["tool"] for call in logged_calls(call_log)] == ["add"]


def test_deep_tool_arguments_from_classified_text() -> None:
    calls: list[dict[str, Any]] = []
    dispatcher = _recording_dispatcher(calls)
    text = '<tool_call>{"name": "a.b", "arguments": {"x": ' + "[" * 900 + "]" * 900 + "}}</tool_call>"
    classified = ROUTER.classify(text)
    assert classified.kind is OutputKind.TOOL_CALL
    result = dispatcher.dispatch(classified)
    assert result.stop_reason == "invalid_route:too_deep"
    assert calls == []


@pytest.mark.parametrize("depth", [300, 500, 10_000])
async def test_deep_a2a_context_is_refused_before_the_bus(depth: int) -> None:
    bus = InProcessEventBus()
    tasks: list[A2ATask] = []

    async def agent(task: A2ATask) -> str:
        tasks.append(task)
        return "ok"

    serve_agent(bus, "reviewer", agent)
    dispatcher = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:reviewer"])
    result = await dispatcher.adispatch(a2a_output(A2ARoutingRequest("reviewer", "review", nested(depth))))
    await bus.drain()
    assert (result.stop_reason, result.phase) == ("invalid_route:too_deep", "route")
    assert tasks == []
    await bus.aclose()


@pytest.mark.parametrize(
    ("context", "what"),
    [
        ({"blob": "x" * 20_000_000}, "max_bytes=1000000"),
        ({f"k{i}": i for i in range(200_000)}, "max_items=10000"),
        ({"blob": "é" * 600_000}, "max_bytes=1000000"),  # 1.2 MB of UTF-8 in 600,000 characters
        ({"n": 10**2000}, "max_int_digits=1000"),
    ],
    ids=["20MB", "200k-keys", "utf8-bytes", "huge-int"],
)
async def test_large_a2a_context_is_refused(context: dict[str, Any], what: str) -> None:
    bus = InProcessEventBus()
    tasks: list[A2ATask] = []

    async def agent(task: A2ATask) -> str:
        tasks.append(task)
        return "ok"

    serve_agent(bus, "reviewer", agent)
    dispatcher = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:reviewer"])
    result = await dispatcher.adispatch(a2a_output(A2ARoutingRequest("reviewer", "review", context)))
    await bus.drain()
    assert result.stop_reason == "invalid_route:too_large"
    assert what in result.message
    assert tasks == []
    await bus.aclose()


async def test_limits_are_configurable_and_a_context_within_them_is_delivered() -> None:
    bus = InProcessEventBus()

    async def agent(task: A2ATask) -> object:
        return task.context

    serve_agent(bus, "reviewer", agent, limits=ArgLimits(max_depth=80))  # each layer has its own limits
    handlers = [A2AHandler(A2ADelegator(bus, limits=ArgLimits(max_depth=70)))]
    roomy = TechniqueDispatcher(handlers=handlers, allow=["a2a:reviewer"], limits=ArgLimits(max_depth=60))
    result = await roomy.adispatch(a2a_output(A2ARoutingRequest("reviewer", "review", nested(50))))
    assert result.ok, result
    tight = TechniqueDispatcher(handlers=handlers, allow=["a2a:reviewer"], limits=ArgLimits(max_bytes=100))
    result = await tight.adispatch(a2a_output(A2ARoutingRequest("reviewer", "review", {"text": "x" * 200})))
    assert (result.stop_reason, result.message) == (
        "invalid_route:too_large",
        "route to 'a2a:reviewer': arguments are larger than max_bytes=100 (UTF-8 of keys and strings)",
    )
    await bus.aclose()


async def test_the_delegator_bounds_a_context_it_is_given_directly() -> None:
    bus = InProcessEventBus()
    tasks: list[A2ATask] = []

    async def agent(task: A2ATask) -> str:
        tasks.append(task)
        return "ok"

    serve_agent(bus, "reviewer", agent)
    delegator = A2ADelegator(bus, reply_timeout=30)
    deep = await delegator.delegate(A2ARoutingRequest("reviewer", "review", nested(10_000)))
    assert (deep.status, deep.stop_reason) == ("failed", "invalid_route:too_deep")
    odd = await delegator.delegate(A2ARoutingRequest("reviewer", "review", {"x": float("nan")}))
    assert odd.stop_reason == "invalid_route:bad_args"
    await bus.drain()
    assert tasks == []
    await bus.aclose()


async def test_an_agent_ignores_a_task_over_its_limits_arriving_on_the_bus(caplog: pytest.LogCaptureFixture) -> None:
    bus = InProcessEventBus()
    tasks: list[A2ATask] = []

    async def agent(task: A2ATask) -> str:
        tasks.append(task)
        return "ok"

    serve_agent(bus, "reviewer", agent)
    payload = {"id": "t1", "target_agent": "reviewer", "task_description": "x", "context": nested(100)}
    with caplog.at_level(logging.WARNING, logger="routegate.technique.a2a"):
        assert await bus.publish("a2a.task.reviewer", payload) == 1
        await bus.drain()
    assert tasks == []
    assert "over its limits" in caplog.text
    await bus.aclose()


# -- all or none ----------------------------------------------------------------------------------------------------


async def test_a_block_with_a_disallowed_call_runs_none_of_it(demo: MCPServerConfig, call_log: Path) -> None:
    async with MCPToolPool([demo]) as pool:
        dispatcher = TechniqueDispatcher(
            handlers=[MCPToolHandler(pool)], allow=["mcp:demo/add"], budget=Budget(max_delegations=5)
        )
        text = (
            '<tool_call>[{"name": "demo.add", "arguments": {"a": 1, "b": 2}},'
            ' {"name": "demo.fail", "arguments": {"reason": "x"}}]</tool_call>'
        )
        result = await dispatcher.adispatch(ROUTER.classify(text))
        assert (result.stop_reason, result.phase) == ("invalid_route:route_not_allowed:mcp:demo/fail", "route")
        assert [outcome.target for outcome in result.output] == ["mcp:demo/fail"]
        bad_second = tool_output(
            ToolCallRequest("demo", "add", {"a": 1, "b": 2}), ToolCallRequest("demo", "add", {"a": 1, "b": "two"})
        )
        result = await dispatcher.adispatch(bad_second)
        assert result.stop_reason == "invalid_route:bad_args"
        ok = await dispatcher.adispatch(tool_output(ToolCallRequest("demo", "add", {"a": 20, "b": 22})))
        assert ok.ok, ok
    assert logged_calls(call_log) == [{"tool": "add", "arguments": {"a": 20, "b": 22}}]


def test_every_gateway_guard_is_checked_before_the_first_part_runs() -> None:
    calls: list[dict[str, Any]] = []
    first = ToolCallRequest("a", "b", {"n": 1})
    cases = {
        "route_denied:mcp:a/c": {"allow": ["mcp:a/b", "mcp:a/c"], "execution_allow": ["mcp:a/b"]},
        "route_missing:mcp:z/c": {"allow": ["mcp:a/b", "mcp:z/c"]},
    }
    for expected, kwargs in cases.items():
        second = ToolCallRequest(expected.rsplit(":", 1)[1].split("/")[0], expected.rsplit("/", 1)[1], {"n": 2})
        result = _recording_dispatcher(calls, **kwargs).dispatch(tool_output(first, second))
        assert result.stop_reason == expected
    result = _recording_dispatcher(calls).dispatch(tool_output(first, first))
    assert result.stop_reason == "loop_detected"
    result = _recording_dispatcher(calls, budget=Budget(max_delegations=1)).dispatch(
        tool_output(first, ToolCallRequest("a", "b", {"n": 2}))
    )
    assert result.stop_reason == "max_delegations"
    assert calls == []


# -- inputSchema ----------------------------------------------------------------------------------------------------


async def test_arguments_are_checked_against_the_tools_input_schema(demo: MCPServerConfig, call_log: Path) -> None:
    async with MCPToolPool([demo]) as pool:
        dispatcher = TechniqueDispatcher(handlers=[MCPToolHandler(pool)], allow=["mcp:demo/add", "mcp:demo/nope"])
        cases = [
            ({"a": 1, "b": 2, "c": "; rm -rf /"}, "invalid_route:bad_args", "'c' was unexpected"),
            ({"a": "1", "b": 2}, "invalid_route:bad_args", "a does not fit its inputSchema"),
            ({"a": 1.5, "b": 2}, "invalid_route:bad_args", "is not of type 'integer'"),
            ({"a": 1}, "invalid_route:missing_b", "required argument 'b' is missing"),
            ({"a": True, "b": 2}, "invalid_route:bad_args", "is not of type 'integer'"),
        ]
        for args, reason, words in cases:
            result = await dispatcher.adispatch(tool_output(ToolCallRequest("demo", "add", args)))
            assert (result.stop_reason, result.phase) == (reason, "route"), args
            assert words in result.message, result.message
        unknown = await dispatcher.adispatch(tool_output(ToolCallRequest("demo", "nope", {})))
        assert (unknown.stop_reason, unknown.message) == (
            "tool_error:mcp:demo/nope",
            "MCP server 'demo' lists no tool named 'nope'",
        )
    assert logged_calls(call_log) == []


def test_a_tool_whose_schema_is_not_json_schema_is_refused() -> None:
    broken = _ToolSchema({"type": "object", "properties": {"a": {"type": "integerish"}}})
    refusal = broken.check("mcp:s/t", {"a": 1})
    assert isinstance(refusal, RouteRejection)
    assert refusal.stop_reason == "tool_schema_invalid:mcp:s/t"
    assert "not valid JSON Schema" in refusal.message
    unreadable = _ToolSchema({"$schema": 12})  # type: ignore[dict-item]  # hostile schema on purpose
    assert unreadable.check("mcp:s/t", {}) is not None
    loop = _ToolSchema({"$ref": "#"})
    assert isinstance(loop.check("mcp:s/t", {"a": 1}), RouteRejection)


def test_schema_drafts_and_open_schemas() -> None:
    draft7 = _ToolSchema(
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {}}}
    )
    assert draft7.check("mcp:s/t", {"a": 1}) is None
    assert draft7.check("mcp:s/t", {"b": 1}) is not None  # closed: it says nothing about other properties
    open_schema = _ToolSchema({"type": "object", "properties": {"a": {}}, "additionalProperties": True})
    assert open_schema.check("mcp:s/t", {"b": 1}) is None


ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}},
    "required": ["a", "b"],
    "title": "addArguments",
}  # what the demo server declares for add(a: int, b: int)
ARGUMENTS = st.dictionaries(
    st.sampled_from(["a", "b", "c", ""]) | st.text(max_size=4),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=10,
    ),
    max_size=4,
)


def _integer(value: object) -> bool:  # JSON Schema's "integer": 2 and 2.0, not True
    return type(value) is int or (type(value) is float and value.is_integer())


@settings(max_examples=300, deadline=None)
@given(ARGUMENTS)
def test_the_input_schema_check_accepts_exactly_what_fits(args: dict[str, Any]) -> None:
    refusal = _ToolSchema(ADD_SCHEMA).check("mcp:demo/add", args)
    fits = set(args) == {"a", "b"} and _integer(args["a"]) and _integer(args["b"])
    assert (refusal is None) == fits, (args, refusal)
    if refusal is not None:
        assert refusal.stop_reason in {"invalid_route:bad_args", "invalid_route:missing_a", "invalid_route:missing_b"}


async def test_unreachable_server_during_the_check(caplog: pytest.LogCaptureFixture) -> None:
    ghost = MCPServerConfig("ghost", command="/nonexistent/mcp-server", connect_timeout=5)
    async with MCPToolPool([ghost]) as pool:
        dispatcher = TechniqueDispatcher(handlers=[MCPToolHandler(pool)], allow=["mcp:ghost/x"])
        result = await dispatcher.adispatch(tool_output(ToolCallRequest("ghost", "x", {})))
    assert result.stop_reason == "tool_unavailable:ghost"
    assert "/nonexistent" not in json.dumps(result.to_dict())


# -- exceptions stay out of what the caller gets --------------------------------------------------------------------

SECRET = "postgres://admin:hunter2@10.0.0.5/prod"


async def test_a_crashing_agents_exception_text_goes_to_the_log_only(caplog: pytest.LogCaptureFixture) -> None:
    bus = InProcessEventBus()

    async def agent(task: A2ATask) -> str:
        raise RuntimeError(f"could not connect to {SECRET}")

    serve_agent(bus, "reviewer", agent)
    dispatcher = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:reviewer"])
    with caplog.at_level(logging.WARNING):
        result = await dispatcher.adispatch(a2a_output(A2ARoutingRequest("reviewer", "review")))
    assert (result.stop_reason, result.message) == (
        "a2a_failed:reviewer",
        "agent 'reviewer' raised RuntimeError (details in the log)",
    )
    assert SECRET not in json.dumps(result.to_dict()) + repr(result)
    assert SECRET in caplog.text
    await bus.aclose()


def test_a_crashing_handlers_exception_text_goes_to_the_log_only(caplog: pytest.LogCaptureFixture) -> None:
    def explode(**args: Any) -> None:
        raise KeyError(SECRET)

    with caplog.at_level(logging.WARNING):
        result = _recording_dispatcher([], fn=explode).dispatch(tool_output(ToolCallRequest("a", "b", {})))
    assert (result.stop_reason, result.message) == (
        "route_error:mcp:a/b",
        "the handler for 'mcp:a/b' raised KeyError (details in the log)",
    )
    assert SECRET not in json.dumps(result.to_dict()) + repr(result)
    assert SECRET in caplog.text


def test_an_async_callable_objects_exception_is_hidden_too(caplog: pytest.LogCaptureFixture) -> None:
    class Tool:
        async def __call__(self, **args: Any) -> None:
            raise OSError(SECRET)

    with caplog.at_level(logging.WARNING):
        result = _recording_dispatcher([], fn=Tool()).dispatch(tool_output(ToolCallRequest("a", "b", {})))
    assert (result.stop_reason, result.message) == (
        "route_error:mcp:a/b",
        "the handler for 'mcp:a/b' raised OSError (details in the log)",
    )
    assert SECRET not in json.dumps(result.to_dict()) and SECRET in caplog.text


async def test_a_secret_in_a_crashing_agent_stays_out_of_the_run_result(caplog: pytest.LogCaptureFixture) -> None:
    bus = InProcessEventBus()

    async def agent(task: A2ATask) -> str:
        raise RuntimeError(f"could not connect to {SECRET}")

    @worker
    def triage(ticket: str) -> dict[str, Any]:
        """Answers with a delegation."""
        return {"status": "done", "result": "ok"}

    class Delegating:
        async def finalize(self, request: FinalizeRequest) -> str:
            return '```a2a\n{"target_agent": "reviewer", "task": "review it"}\n```'

    serve_agent(bus, "reviewer", agent)
    dispatcher = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:reviewer"])
    run = RoutingAgent(
        workers=[triage],
        router=ScriptedRouter([{"kind": "route", "target": "triage", "args": {"ticket": "x"}}]),
        finalizer=TechniqueFinalizer(Delegating(), dispatcher=dispatcher),
    )
    with caplog.at_level(logging.WARNING):
        result = await run.arun("help")
    assert (result.stop_reason, result.phase) == ("a2a_failed:reviewer", "finalize")
    assert SECRET not in result.to_json() and SECRET in caplog.text
    await bus.aclose()


# -- helpers --------------------------------------------------------------------------------------------------------


def _recording_dispatcher(calls: list[dict[str, Any]], *, fn: Any = None, **kwargs: Any) -> TechniqueDispatcher:
    kwargs.setdefault("allow", ["mcp:a/b"])
    return TechniqueDispatcher(handlers=[RecordingToolHandler(calls, fn)], **kwargs)
