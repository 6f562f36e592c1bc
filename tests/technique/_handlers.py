"""Test handlers that record what reached them: the observable side of "nothing ran"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from routegate.core import Worker
from routegate.technique import OutputKind
from routegate.technique.types import TechniqueItem, ToolCallRequest


class McpToolHandler:
    """The routing half every test tool-call handler shares: ``mcp:<server>/<tool>`` targets, the call's arguments
    as given, no schema of its own. A subclass says what each target's worker does."""

    kind: OutputKind = OutputKind.TOOL_CALL
    prefix: str = "mcp"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        assert isinstance(item, ToolCallRequest)
        return f"mcp:{item.qualified_name}", dict(item.arguments)

    def schema(self, target: str) -> type[BaseModel] | None:
        return None


@dataclass
class RecordingToolHandler(McpToolHandler):
    """A tool-call handler (``mcp:<server>/<tool>``) whose workers append their arguments to ``calls``.

    ``fn`` replaces what a worker does after recording (a function that raises, for instance). Targets on
    server ``z`` have no worker (``route_missing``).
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    fn: Callable[..., Any] | None = None

    def worker(self, target: str) -> Worker | None:
        if target.startswith("mcp:z/"):
            return None
        calls, fn = self.calls, self.fn

        def record(**args: Any) -> object:
            calls.append(args)
            return fn(**args) if fn is not None else {"ok": True}

        return Worker(name=target, fn=record, inline=True)
