"""Hostile input through ``adispatch``: it always returns a result with a stop reason, fast, and never raises.

A property test over arbitrary nested and large JSON, and a corpus of what an attacker would try: values JSON
cannot hold, huge numbers, odd keys, cycles, odd text, deep and wide shapes, many parts, broken handlers.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import UserDict
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.core import Budget
from routegate.technique import (
    A2ADelegator,
    A2AHandler,
    A2ATask,
    ClassifiedOutput,
    DispatchResult,
    InProcessEventBus,
    OutputKind,
    TechniqueDispatcher,
    TechniqueRouter,
    serve_agent,
)
from routegate.technique.types import A2ARoutingRequest, ToolCallRequest
from technique._handlers import RecordingToolHandler

CPU_BOUND_SECONDS = 2.0  # a hostile shape must not blow up the work: CPU seconds of this process, so other load
# on the machine cannot fail it (a refusal measured about a millisecond)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6),
    max_leaves=60,
)


def _wrap(value: object, depth: int, as_list: bool) -> object:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


SHAPES = st.one_of(
    JSON,
    st.builds(_wrap, JSON, st.integers(0, 20_000), st.booleans()),  # deep
    st.builds(lambda n, v: {f"k{i}": v for i in range(n)}, st.integers(0, 60_000), JSON),  # wide
    st.builds(lambda n, v: [v] * n, st.integers(0, 60_000), JSON),  # long
    st.builds(lambda n, ch: ch * n, st.integers(0, 3_000_000), st.sampled_from(["x", "é", "\U0001f600"])),  # big
)


class Setup:
    """One event loop, a recording tool handler and a served A2A agent that records what reached it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.tool_calls: list[dict[str, Any]] = []
        self.tasks: list[A2ATask] = []
        self.bus = InProcessEventBus()

        async def agent(task: A2ATask) -> object:
            self.tasks.append(task)
            return {"seen": len(task.context)}

        serve_agent(self.bus, "reviewer", agent)
        budget = Budget(max_delegations=4, max_seconds=30)
        self.tools = TechniqueDispatcher(
            handlers=[RecordingToolHandler(self.tool_calls)], allow=["mcp:a/b"], budget=budget
        )
        delegator = A2ADelegator(self.bus, reply_timeout=5)
        self.a2a = TechniqueDispatcher(handlers=[A2AHandler(delegator)], allow=["a2a:reviewer"], budget=budget)

    def run(self, dispatcher: TechniqueDispatcher, classified: ClassifiedOutput) -> tuple[DispatchResult, float]:
        started = time.process_time()
        result = self.loop.run_until_complete(dispatcher.adispatch(classified))
        elapsed = time.process_time() - started
        self.loop.run_until_complete(self.bus.drain())
        return result, elapsed

    def close(self) -> None:
        self.loop.run_until_complete(self.bus.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    made = Setup()
    yield made
    made.close()


def _check(result: DispatchResult, elapsed: float) -> None:
    assert isinstance(result, DispatchResult)
    assert isinstance(result.stop_reason, str) and result.stop_reason
    assert result.status == ("ok" if result.stop_reason == "success" else "stopped")
    json.dumps(result.to_dict())  # what the caller gets is JSON
    assert elapsed < CPU_BOUND_SECONDS, (result.stop_reason, elapsed)


def _tool(args: dict[Any, Any]) -> ClassifiedOutput:
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=(ToolCallRequest("a", "b", args),))


def _a2a(context: dict[Any, Any]) -> ClassifiedOutput:
    request = A2ARoutingRequest("reviewer", "review", context)
    return ClassifiedOutput(OutputKind.A2A_REQUEST, "", a2a_requests=(request,))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=SHAPES, key=st.text(max_size=10))
def test_any_nested_or_large_json_ends_in_a_stop_reason_fast(setup: Setup, value: object, key: str) -> None:
    for dispatcher, classified in ((setup.tools, _tool({key: value})), (setup.a2a, _a2a({key: value}))):
        result, elapsed = setup.run(dispatcher, classified)
        _check(result, elapsed)
        if result.stop_reason.startswith("invalid_route:"):
            assert result.phase == "route"


class Raising(UserDict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("a mapping that fails when read")


class Lying(dict[str, Any]):
    def __len__(self) -> int:
        return 0  # claims to be empty


def _cycle_dict() -> dict[str, Any]:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    return cycle


def _cycle_list() -> dict[str, Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return {"list": cycle}


def _shared() -> dict[str, Any]:
    node: Any = "leaf"
    for _ in range(64):  # 2**64 paths if expanded; the walk counts every visit, so it stops at max_items
        node = [node, node]
    return {"dag": node}


CORPUS: dict[str, object] = {
    "nan": {"x": math.nan},
    "infinity": {"x": math.inf},
    "-infinity": {"x": [-math.inf]},
    "huge int": {"x": 10**5000},
    "int past 64 bits": {"x": 2**200},
    "int key": {1: "x"},
    "tuple key": {(1, 2): "x"},
    "none key": {None: 1},
    "bytes value": {"x": b"\x00\xff"},
    "bytearray value": {"x": bytearray(b"x")},
    "set value": {"x": {1, 2}},
    "object value": {"x": object()},
    "decimal value": {"x": Decimal("1.5")},
    "dict cycle": _cycle_dict(),
    "list cycle": _cycle_list(),
    "shared dag": _shared(),
    "lone surrogate": {"x": "\ud800", "\udfff": 1},
    "line separators": {"x": "\u2028\u2029\x00\x1b[2J"},
    "right-to-left": {"\u202eevil": "\u202e"},
    "zero width": {"\u200b": "\ufeff"},
    "emoji bytes": {"x": "\U0001f600" * 300_000},
    "empty key": {"": ""},
    "long key": {"k" * 2_000_000: 1},
    "deep list": {"x": _wrap(1, 10_000, True)},
    "deep mixed": {"x": _wrap(_wrap(1, 3_000, True), 3_000, False)},
    "many small": {"x": list(range(200_000))},
    "many keys": {str(i): None for i in range(200_000)},
    "tuple": {"x": (1, 2, 3)},
    "mapping that raises": {"x": Raising({"a": 1})},
    "lying length": {"x": Lying(a=1)},
    "bool subclass as int": {"x": True, "y": 0},
    "str subclass": {"x": type("S", (str,), {})("text")},
    "json-looking text": {"x": '{"__proto__": {"admin": true}}'},
    "fine": {"x": [1, 2.5, "three", None, True, {"four": 4}]},
}


REFUSED = {
    "nan", "infinity", "-infinity", "huge int", "int key", "tuple key", "none key", "bytes value", "bytearray value",
    "set value", "object value", "decimal value", "dict cycle", "list cycle", "shared dag", "emoji bytes",
    "long key", "deep list", "deep mixed", "many small", "many keys",
}  # fmt: skip


@pytest.mark.parametrize("name", list(CORPUS))
def test_hostile_corpus_never_raises(setup: Setup, name: str) -> None:
    value = CORPUS[name]
    assert isinstance(value, dict)
    for dispatcher, classified in ((setup.tools, _tool(value)), (setup.a2a, _a2a(value))):
        before = (len(setup.tool_calls), len(setup.tasks))
        result, elapsed = setup.run(dispatcher, classified)
        _check(result, elapsed)
        if name in REFUSED:
            assert (result.status, result.phase) == ("stopped", "route"), (name, result)
            assert (len(setup.tool_calls), len(setup.tasks)) == before, name
        if name == "fine":
            assert result.ok, result


def test_many_parts_and_broken_handlers(setup: Setup) -> None:
    calls = tuple(ToolCallRequest("a", "b", {"n": i}) for i in range(10_000))
    result, elapsed = setup.run(setup.tools, ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls))
    _check(result, elapsed)
    assert result.stop_reason == "max_delegations"

    class BrokenRoute(RecordingToolHandler):
        def route(self, item: Any) -> tuple[str, dict[str, Any]]:
            raise AttributeError("the handler itself is broken")

    broken = TechniqueDispatcher(handlers=[BrokenRoute()], allow=["mcp:a/b"])
    result, elapsed = setup.run(broken, _tool({"x": 1}))
    _check(result, elapsed)
    assert (result.stop_reason, result.phase, result.message) == (
        "route_error:tool_call",
        "route",
        "the tool_call dispatch raised AttributeError (details in the log)",
    )

    class LateTimeout(RecordingToolHandler):
        def route(self, item: Any) -> tuple[str, dict[str, Any]]:
            raise TimeoutError("not the dispatch's own deadline")

    late = TechniqueDispatcher(handlers=[LateTimeout()], allow=["mcp:a/b"])
    result, elapsed = setup.run(late, _tool({"x": 1}))
    _check(result, elapsed)
    assert result.stop_reason == "route_error:tool_call"


HOSTILE_TEXTS = [
    '<tool_call>{"name": "a.b", "arguments": {"x": NaN}}</tool_call>',
    '<tool_call>{"name": "a.b", "arguments": {"x": Infinity, "y": -Infinity}}</tool_call>',
    '<tool_call>{"name": "a.b", "arguments": {"x": 1' + "0" * 5000 + "}}</tool_call>",
    '<tool_call>{"name": "a.b", "arguments": {"x": ' + "[" * 990 + "]" * 990 + "}}</tool_call>",
    '<tool_call>{"name": "a.b", "arguments": "{\\"x\\": ' + "[" * 500 + "]" * 500 + '}"}</tool_call>',
    '<tool_call>{"name": "a.b", "arguments": {"x": "\\ud800", "\\u0000": 1}}</tool_call>',
    '<tool_call>{"name": "a.b", "arguments": {"x": 1, "x": 2}}</tool_call>',
    '```a2a\n{"target_agent": "reviewer", "task": "t", "context": {"c": "' + "x" * 2_000_000 + '"}}\n```',
    "<tool_call>[" + ",".join(f'{{"name": "a.b", "arguments": {{"n": {i}}}}}' for i in range(64)) + "]</tool_call>",
]


@pytest.mark.parametrize("index", range(len(HOSTILE_TEXTS)))
def test_hostile_text_through_the_classifier(setup: Setup, index: int) -> None:
    classified = TechniqueRouter().classify(HOSTILE_TEXTS[index])
    dispatcher = setup.a2a if classified.kind is OutputKind.A2A_REQUEST else setup.tools
    before = len(setup.tool_calls)
    result, elapsed = setup.run(dispatcher, classified)
    _check(result, elapsed)
    if index < 5:  # not JSON the classifier can read (prose), or refused at the policy boundary: nothing ran
        assert classified.is_prose or result.phase == "route", result
        assert len(setup.tool_calls) == before
