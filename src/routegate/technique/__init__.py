"""routegate.technique: classify an agent's output (prose / code block / tool call / A2A request) and dispatch it."""

from routegate.technique.classify import A2A_TAGS, EXECUTABLE_LANGUAGES, TOOL_CALL_TAGS, TechniqueRouter
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

__all__ = [
    "A2A_TAGS",
    "EXECUTABLE_LANGUAGES",
    "TOOL_CALL_TAGS",
    "A2ARoutingRequest",
    "ClassifiedOutput",
    "CodeArgs",
    "CodeBlock",
    "CodeHandler",
    "CodeRun",
    "DispatchOutcome",
    "DispatchResult",
    "HandlerRegistry",
    "OutputKind",
    "SandboxLimits",
    "SandboxRunner",
    "TechniqueDispatcher",
    "TechniqueHandler",
    "TechniqueItem",
    "TechniqueRouter",
    "ToolCallRequest",
]
