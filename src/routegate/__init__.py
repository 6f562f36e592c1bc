"""routegate: governed routing of requests to specialised executors.

A router (rules, embeddings or an LLM) picks the executor; the policy boundary validates that decision as untrusted
input; the gateway delegates under budgets and loop guards; every run ends with an explicit stop reason and a trace.
"""

from importlib.metadata import PackageNotFoundError, version

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
from routegate.errors import ConfigurationError, RoutegateError, RunStopError, RuntimeFaultError

try:
    __version__ = version("routegate")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

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
