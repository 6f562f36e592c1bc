"""routegate.technique: classify an agent's output (prose / code block / tool call / A2A request) and dispatch it."""

from routegate.technique.classify import A2A_TAGS, EXECUTABLE_LANGUAGES, TOOL_CALL_TAGS, TechniqueRouter
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
    "CodeBlock",
    "OutputKind",
    "TechniqueItem",
    "TechniqueRouter",
    "ToolCallRequest",
]
