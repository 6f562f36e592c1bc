"""routegate: governed routing of requests to specialised executors.

A router (rules, embeddings or an LLM) picks the executor; the policy boundary validates that decision as untrusted
input; the gateway delegates under budgets and loop guards; every run ends with an explicit stop reason and a trace.

The names below are imported on first use (:pep:`562`): ``import routegate.cli`` or ``import routegate.settings``
does not load the core (pydantic models, asyncio) or read the package metadata until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.errors import ConfigurationError, RoutegateError, RunStopError, RuntimeFaultError

if TYPE_CHECKING:
    from routegate.core import (
        Budget,
        FinalAnswer,
        Finalizer,
        FinalizeRequest,
        RouteDecision,
        Router,
        RouteRequest,
        RunContext,
        RunResult,
        Worker,
        WorkerArgs,
        worker,
    )
    from routegate.plan import Plan, RoutingAgent, Step, ToolAgent

    __version__: str

__all__ = [
    "Budget",
    "ConfigurationError",
    "FinalAnswer",
    "FinalizeRequest",
    "Finalizer",
    "Plan",
    "RouteDecision",
    "RouteRequest",
    "RoutegateError",
    "Router",
    "RoutingAgent",
    "RunContext",
    "RunResult",
    "RunStopError",
    "RuntimeFaultError",
    "Step",
    "ToolAgent",
    "Worker",
    "WorkerArgs",
    "__version__",
    "worker",
]

_CORE = (
    "Budget",
    "FinalAnswer",
    "FinalizeRequest",
    "Finalizer",
    "RouteDecision",
    "RouteRequest",
    "Router",
    "RunContext",
    "RunResult",
    "Worker",
    "WorkerArgs",
    "worker",
)
_WHERE = {
    "__version__": "_version",
    "Plan": "plan",
    "RoutingAgent": "plan.agent",
    "Step": "plan",
    "ToolAgent": "plan.tool_agent",
    **dict.fromkeys(_CORE, "core"),
}
_MOVED = {"TicketArgs": "core"}  # the demo's argument schema, not an API of its own

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__, moved=_MOVED)
