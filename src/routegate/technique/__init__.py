"""routegate.technique: classify an agent's output (prose / code block / tool call / A2A request) and dispatch it.

The MCP names (``MCPToolPool``...) are imported on first use: the ``mcp`` SDK takes most of a second to import
and classification alone does not need it.
"""

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.sandbox import CodeRun, SandboxLimits, SandboxRunner
from routegate.technique.a2a import (
    A2AArgs,
    A2ADelegator,
    A2AHandler,
    A2ATask,
    EventBus,
    InProcessEventBus,
    serve_agent,
)
from routegate.technique.agent import TechniqueFinalizer, dispatch_answer, technique_worker
from routegate.technique.classify import TechniqueRouter
from routegate.technique.code import CodeArgs, CodeHandler
from routegate.technique.dispatch import (
    DispatchOutcome,
    DispatchResult,
    TechniqueDispatcher,
)
from routegate.technique.types import (
    ClassifiedOutput,
    OutputKind,
)

if TYPE_CHECKING:
    from routegate.technique.tools import MCPServerConfig, MCPToolHandler, MCPToolPool

__all__ = [
    "A2AArgs",
    "A2ADelegator",
    "A2AHandler",
    "A2ATask",
    "ClassifiedOutput",
    "CodeArgs",
    "CodeHandler",
    "CodeRun",
    "DispatchOutcome",
    "DispatchResult",
    "EventBus",
    "InProcessEventBus",
    "MCPServerConfig",
    "MCPToolHandler",
    "MCPToolPool",
    "OutputKind",
    "SandboxLimits",
    "SandboxRunner",
    "TechniqueDispatcher",
    "TechniqueFinalizer",
    "TechniqueRouter",
    "dispatch_answer",
    "serve_agent",
    "technique_worker",
]

_TOOLS = ("MCPServerConfig", "MCPToolHandler", "MCPToolPool")
_MOVED = {  # the dispatcher's own records and parsed shapes, importable from their modules
    "A2AOutcome": "a2a",
    "A2ARoutingRequest": "types",
    "BusMessage": "a2a",
    "CodeBlock": "types",
    "EXECUTABLE_LANGUAGES": "classify",
    "HandlerRegistry": "dispatch",
    "TechniqueHandler": "dispatch",
    "TechniqueItem": "types",
    "ToolArguments": "tools",
    "ToolCallRequest": "types",
    "ToolOutcome": "tools",
}
__getattr__, __dir__ = _lazy_exports(__name__, dict.fromkeys(_TOOLS, "tools"), __all__, moved=_MOVED)
