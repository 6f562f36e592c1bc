"""routegate.core: contracts, policy boundary, gateway and the governance kernel (the routing agent, a prebuilt
Plan, is :class:`routegate.plan.RoutingAgent`).

The names below are imported on first use (:pep:`562`), so importing one small module of the core (the message
rule the settings use, say) does not load the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from routegate.core import stop_reasons
    from routegate.core.compose import GroundedComposer
    from routegate.core.context import RunContext
    from routegate.core.contracts import ArgLimits, Budget, TraceEntry
    from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent, RunEvent
    from routegate.core.gateway import RouteGateway
    from routegate.core.governed import GovernedStep
    from routegate.core.outcome import Outcome
    from routegate.core.policy import RoutePolicy
    from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
    from routegate.core.provenance import (
        From,
        LinksFrom,
        NotFrom,
        ProvenanceLedger,
        Sensitive,
        Source,
        links_only_from,
    )
    from routegate.core.result import AgentResult, RunResult
    from routegate.core.workers import TicketArgs, Worker, WorkerArgs, worker

__all__ = [
    "AgentResult",
    "ArgLimits",
    "Budget",
    "DecisionEvent",
    "DelegationEvent",
    "FinalAnswer",
    "FinalEvent",
    "FinalizeRequest",
    "Finalizer",
    "From",
    "GovernedStep",
    "GroundedComposer",
    "LinksFrom",
    "NotFrom",
    "ObservationEvent",
    "Outcome",
    "ProvenanceLedger",
    "RouteDecision",
    "RouteGateway",
    "RoutePolicy",
    "RouteRequest",
    "Router",
    "RunContext",
    "RunEvent",
    "RunResult",
    "Sensitive",
    "Source",
    "TicketArgs",
    "TraceEntry",
    "Worker",
    "WorkerArgs",
    "links_only_from",
    "stop_reasons",
    "worker",
]

_WHERE = {
    "AgentResult": "result",
    "ArgLimits": "contracts",
    "Budget": "contracts",
    "DecisionEvent": "events",
    "DelegationEvent": "events",
    "FinalAnswer": "protocols",
    "FinalEvent": "events",
    "FinalizeRequest": "protocols",
    "Finalizer": "protocols",
    "From": "provenance",
    "GovernedStep": "governed",
    "GroundedComposer": "compose",
    "LinksFrom": "provenance",
    "NotFrom": "provenance",
    "ObservationEvent": "events",
    "Outcome": "outcome",
    "ProvenanceLedger": "provenance",
    "RouteDecision": "protocols",
    "RouteGateway": "gateway",
    "RoutePolicy": "policy",
    "RouteRequest": "protocols",
    "Router": "protocols",
    "RunContext": "context",
    "RunEvent": "events",
    "RunResult": "result",
    "Sensitive": "provenance",
    "Source": "provenance",
    "TicketArgs": "workers",
    "TraceEntry": "contracts",
    "Worker": "workers",
    "WorkerArgs": "workers",
    "links_only_from": "provenance",
    "stop_reasons": "stop_reasons",
    "worker": "workers",
}

# the governance kernel's plumbing: the runtimes compose it from its own modules, an application does not (the
# governed step itself is exported: a team that governs a loop of its own calls it; what it returns, Delegated and
# Stopped, is read from routegate.core.governed)
_MOVED = {
    "ABSENT": "contracts",
    "Deadline": "_deadline",
    "Delegated": "governed",
    "DelegationLedger": "contracts",
    "DelegationStop": "gateway",
    "RouteRejection": "policy",
    "Stopped": "governed",
    "NormalizedText": "workers",
    "HistoryEntry": "contracts",
    "RouteIntent": "contracts",
    "RouteSpec": "contracts",
    "RoutingAgent": "routegate.plan.agent",  # a prebuilt Plan: the plan layer is above the core
}

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__, moved=_MOVED)
