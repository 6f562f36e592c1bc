"""routegate.technique: classify an agent's output (prose / code block / tool call / A2A request) and dispatch it.

The MCP names (``MCPToolPool``...) are imported on first use: the ``mcp`` SDK takes most of a second to import
and classification alone does not need it.
"""

import importlib
from typing import TYPE_CHECKING

from routegate.technique.a2a import (
    A2AArgs,
    A2ADelegator,
    A2AHandler,
    A2AOutcome,
    A2ATask,
    BusMessage,
    EventBus,
    InProcessEventBus,
    serve_agent,
)
from routegate.technique.agent import TechniqueFinalizer, dispatch_answer, technique_worker
from routegate.technique.classify import EXECUTABLE_LANGUAGES, TechniqueRouter
from routegate.technique.dispatch import (
    DispatchOutcome,
    DispatchResult,
    HandlerRegistry,
    TechniqueDispatcher,
    TechniqueHandler,
)
from routegate.technique.sandbox import CodeArgs, CodeHandler, CodeRun, SandboxLimits, SandboxRunner
from routegate.technique.types import (
    A2ARoutingRequest,
    ClassifiedOutput,
    CodeBlock,
    OutputKind,
    TechniqueItem,
    ToolCallRequest,
)

if TYPE_CHECKING:
    from routegate.technique.tools import MCPServerConfig, MCPToolHandler, MCPToolPool, ToolArguments, ToolOutcome

_LAZY = frozenset({"MCPServerConfig", "MCPToolHandler", "MCPToolPool", "ToolArguments", "ToolOutcome"})


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module("routegate.technique.tools"), name)
    raise AttributeError(f"module 'routegate.technique' has no attribute {name!r}")


__all__ = [
    "EXECUTABLE_LANGUAGES",
    "A2AArgs",
    "A2ADelegator",
    "A2AHandler",
    "A2AOutcome",
    "A2ARoutingRequest",
    "A2ATask",
    "BusMessage",
    "ClassifiedOutput",
    "CodeArgs",
    "CodeBlock",
    "CodeHandler",
    "CodeRun",
    "DispatchOutcome",
    "DispatchResult",
    "EventBus",
    "HandlerRegistry",
    "InProcessEventBus",
    "MCPServerConfig",
    "MCPToolHandler",
    "MCPToolPool",
    "OutputKind",
    "SandboxLimits",
    "SandboxRunner",
    "TechniqueDispatcher",
    "TechniqueFinalizer",
    "TechniqueHandler",
    "TechniqueItem",
    "TechniqueRouter",
    "ToolArguments",
    "ToolCallRequest",
    "ToolOutcome",
    "dispatch_answer",
    "serve_agent",
    "technique_worker",
]
