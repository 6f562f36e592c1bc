"""Property tests at the other untrusted boundaries: the JSON shape parsers and dispatch of any output."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.core import Budget, Worker
from routegate.technique import TechniqueDispatcher, TechniqueRouter
from routegate.technique._shapes import ShapeError, a2a_requests_from, tool_calls_from
from routegate.technique.a2a import A2AArgs
from routegate.technique.types import A2ARoutingRequest, CodeBlock, OutputKind, TechniqueItem, ToolCallRequest

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "name",
        "arguments",
        "parameters",
        "server",
        "method",
        "tool",
        "params",
        "function",
        "tool_calls",
        "type",
        "id",
        "target_agent",
        "agent",
        "to",
        "task",
        "task_description",
        "context",
        "role",
        "content",
    ]
)
CALLISH = st.recursive(
    JSON,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(CALLISH)
# an unhashable 'type' once raised TypeError
@example({"target_agent": "billing", "task": "refund", "type": ["a2a_request"]})
def test_shape_parsers_only_ever_raise_shape_error(value: object) -> None:
    for parse in (tool_calls_from, a2a_requests_from):
        try:
            parsed = parse(value)
        except ShapeError:
            continue
        assert parsed
        for item in parsed:
            assert isinstance(item, ToolCallRequest | A2ARoutingRequest)
            json.dumps(item.to_dict())  # extractions are JSON-ready


@dataclass
class Recorder:
    """Serves every kind's targets with a worker that records what it received."""

    kind: OutputKind
    prefix: str

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        if isinstance(item, CodeBlock):
            return f"code:{item.language}", {"code": item.code}
        if isinstance(item, ToolCallRequest):
            return f"mcp:{item.server}/{item.method}", dict(item.arguments)
        return f"a2a:{item.target_agent}", {"task_description": item.task_description, "context": item.context}

    def schema(self, target: str) -> type[BaseModel] | None:
        return A2AArgs if self.kind is OutputKind.A2A_REQUEST else None

    def worker(self, target: str) -> Worker | None:
        async def record(**args: Any) -> dict[str, Any]:
            return args

        return Worker(name=target, fn=record)


DISPATCHER = TechniqueDispatcher(
    handlers=[
        Recorder(OutputKind.CODE_BLOCK, "code"),
        Recorder(OutputKind.TOOL_CALL, "mcp"),
        Recorder(OutputKind.A2A_REQUEST, "a2a"),
    ],
    allow=["code:python", "mcp:a/b", "a2a:x"],
    budget=Budget(max_delegations=2),
)
ROUTER = TechniqueRouter()
PIECES = st.sampled_from(
    [
        "```python\nprint(1)\n```\n",
        "```bash\nls\n```\n",
        '<tool_call>{"name": "a.b", "arguments": {"k": 1}}</tool_call>\n',
        '<tool_call>{"name": "c.d", "arguments": {}}</tool_call>\n',
        '```a2a\n{"target_agent": "x", "task": "t"}\n```\n',
        '```a2a\n{"target_agent": "y", "task": "t"}\n```\n',
        "plain words\n",
        "```\n",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=10)), max_size=8).map("".join))
def test_dispatch_of_any_output_ends_with_a_stop_reason(text: str) -> None:
    classified = ROUTER.classify(text)
    result = DISPATCHER.dispatch(classified)
    assert result.kind is classified.kind
    assert result.status == ("ok" if result.stop_reason == "success" else "stopped")
    assert len(result.output) <= len(classified.items())
    assert all(outcome.ok for outcome in result.output[:-1])
    if classified.is_prose:
        assert result.output == ()
    json.dumps(result.to_dict())
