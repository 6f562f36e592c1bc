"""The public surface of routegate.technique is pinned: changing it is a deliberate change to this test."""

from __future__ import annotations

import pytest

import routegate.technique as technique


def test_technique_exports_are_pinned() -> None:
    assert sorted(technique.__all__) == sorted(
        [
            "A2A_TAGS",
            "EXECUTABLE_LANGUAGES",
            "TOOL_CALL_TAGS",
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
            "render_dispatch",
            "serve_agent",
            "technique_worker",
        ]
    )
    for name in technique.__all__:
        assert getattr(technique, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(technique, "NoSuchThing")  # noqa: B009  # the lazy __getattr__ must refuse it
