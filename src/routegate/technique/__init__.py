"""routegate.technique: classify an agent's output (prose / code block / tool call / A2A request) and dispatch it.

The MCP names (``MCPToolPool``...) are imported on first use: the ``mcp`` SDK takes most of a second to import
and classification alone does not need it.
"""

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.sandbox.supervisor import CodeRun, SandboxLimits, SandboxRunner
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
from routegate.technique.code import CodeArgs, CodeHandler
from routegate.technique.dispatch import (
    DispatchOutcome,
    DispatchResult,
    HandlerRegistry,
    TechniqueDispatcher,
    TechniqueHandler,
)
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

_TOOLS = ("MCPServerConfig", "MCPToolHandler", "MCPToolPool", "ToolArguments", "ToolOutcome")
__getattr__, __dir__ = _lazy_exports(__name__, dict.fromkeys(_TOOLS, "tools"), __all__)
