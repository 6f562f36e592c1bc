"""routegate: governed routing of requests to specialised executors.

A router (rules, embeddings or an LLM) picks the executor; the policy boundary validates that decision as untrusted
input; the gateway delegates under budgets and loop guards; every run ends with an explicit stop reason and a trace.

The names below are imported on first use (:pep:`562`): ``import routegate.cli`` or ``import routegate.settings``
does not load the core (pydantic models, asyncio) or read the package metadata until something needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        RoutingAgent,
        RunResult,
        TicketArgs,
        Worker,
        WorkerArgs,
        worker,
    )

    __version__: str

__all__ = [
    "Budget",
    "ConfigurationError",
    "FinalAnswer",
    "FinalizeRequest",
    "Finalizer",
    "RouteDecision",
    "RouteRequest",
    "RoutegateError",
    "Router",
    "RoutingAgent",
    "RunResult",
    "RunStopError",
    "RuntimeFaultError",
    "TicketArgs",
    "Worker",
    "WorkerArgs",
    "__version__",
    "worker",
]

_FROM_CORE = frozenset(
    {
        "Budget",
        "FinalAnswer",
        "FinalizeRequest",
        "Finalizer",
        "RouteDecision",
        "RouteRequest",
        "Router",
        "RoutingAgent",
        "RunResult",
        "TicketArgs",
        "Worker",
        "WorkerArgs",
        "worker",
    }
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("routegate")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "0.0.0"


def __getattr__(name: str) -> object:
    if name == "__version__":
        value: object = _version()
    elif name in _FROM_CORE:
        import routegate.core

        value = getattr(routegate.core, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
