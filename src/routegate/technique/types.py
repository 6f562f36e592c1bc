"""What the technique router extracts from an agent's output: the kind, and the parts to act on.

Frozen dataclasses: these are values the classifier builds after checking the text. The extracted parts are
still *untrusted* (a model wrote them); dispatch sends every one through the policy boundary before it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from routegate.core.contracts import jsonable


class OutputKind(StrEnum):
    """Classification of agent output for routing decisions (priority: A2A > tool call > code block > prose)."""

    PROSE = "prose"
    """Standard text output — no special routing."""
    CODE_BLOCK = "code_block"
    """Executable code in markdown fences — route to the sandbox."""
    TOOL_CALL = "tool_call"
    """MCP tool invocation — route to the shared MCP pool."""
    A2A_REQUEST = "a2a_request"
    """Inter-agent task delegation — route through the event bus."""


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """An extracted code block: the (normalised) language tag of its fence and the code between the fences."""

    language: str
    code: str

    def to_dict(self) -> dict[str, Any]:
        return {"language": self.language, "code": self.code}


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A parsed MCP tool call.

    ``server`` is ``""`` when the call named only a tool (``{"name": "search", ...}``); dispatch then resolves
    it against the configured servers. ``arguments`` holds JSON values, not only strings (MCP tools take typed
    arguments; a ``dict[str, str]`` would lose them).
    """

    server: str
    method: str
    arguments: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def qualified_name(self) -> str:
        return f"{self.server}/{self.method}" if self.server else self.method

    def to_dict(self) -> dict[str, Any]:
        return {"server": self.server, "method": self.method, "arguments": jsonable(self.arguments)}


@dataclass(frozen=True, slots=True)
class A2ARoutingRequest:
    """A parsed inter-agent delegation: who should do it, what, and any context (JSON values)."""

    target_agent: str
    task_description: str
    context: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_agent": self.target_agent,
            "task_description": self.task_description,
            "context": jsonable(self.context),
        }


TechniqueItem = CodeBlock | ToolCallRequest | A2ARoutingRequest
"""One extracted part that a handler can act on."""


@dataclass(frozen=True, slots=True)
class ClassifiedOutput:
    """Result of classifying agent output: the kind that wins, and every recognised part.

    All recognised parts are extracted whatever the kind (a tool call next to a code block keeps both), but
    dispatch acts only on the parts of :attr:`kind`. ``problems`` says why text that looked like a tool call,
    an A2A request or a code block was *not* taken as one (malformed JSON, an unterminated fence, ...).
    """

    kind: OutputKind
    text: str = field(repr=False)
    code_blocks: tuple[CodeBlock, ...] = ()
    tool_calls: tuple[ToolCallRequest, ...] = ()
    a2a_requests: tuple[A2ARoutingRequest, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def is_prose(self) -> bool:
        return self.kind is OutputKind.PROSE

    def items(self, kind: OutputKind | None = None) -> tuple[TechniqueItem, ...]:
        """The extracted parts of ``kind`` (default: the winning kind); ``()`` for prose."""
        match kind or self.kind:
            case OutputKind.CODE_BLOCK:
                return self.code_blocks
            case OutputKind.TOOL_CALL:
                return self.tool_calls
            case OutputKind.A2A_REQUEST:
                return self.a2a_requests
            case _:
                return ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "code_blocks": [block.to_dict() for block in self.code_blocks],
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "a2a_requests": [request.to_dict() for request in self.a2a_requests],
            "problems": list(self.problems),
        }
