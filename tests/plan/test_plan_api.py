"""The public surface of routegate.plan is pinned."""

from __future__ import annotations

import routegate.plan
from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.plan import MaxIterationsExceeded, PlanCompileError, PlanRuntimeError


def test_exported_names_are_pinned() -> None:
    assert sorted(routegate.plan.__all__) == [
        "ChatCompleter",
        "CheckpointConflictError",
        "CheckpointMismatchError",
        "Checkpoints",
        "DetourTrapWarning",
        "Envelope",
        "ErrorInfo",
        "FieldRef",
        "FromParallel",
        "FromParallelAll",
        "FromPrev",
        "FromStart",
        "FromStep",
        "Interrupt",
        "MaxIterationsExceeded",
        "Plan",
        "PlanCompileError",
        "PlanEvent",
        "PlanFinalEvent",
        "PlanResult",
        "PlanRuntimeError",
        "Predicate",
        "RunRecord",
        "Sentinel",
        "Step",
        "StepContext",
        "StepEvent",
        "StepTarget",
        "Store",
        "StructuredChatModel",
        "When",
        "from_parallel",
        "from_parallel_all",
        "from_prev",
        "from_start",
        "from_step",
        "interrupt",
        "payload_text",
        "step_key",
        "when",
    ]
    for name in routegate.plan.__all__:
        assert hasattr(routegate.plan, name)


def test_error_families() -> None:
    assert issubclass(PlanCompileError, ConfigurationError)
    assert issubclass(PlanRuntimeError, RuntimeFaultError) and issubclass(PlanRuntimeError, RuntimeError)
    assert issubclass(MaxIterationsExceeded, PlanRuntimeError)
