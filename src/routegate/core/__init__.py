"""routegate.core: contracts, policy boundary, gateway, the governance kernel and the routing agent.

The names below are imported on first use (:pep:`562`), so importing one small module of the core (the message
rule the settings use, say) does not load the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from routegate.core import stop_reasons
    from routegate.core._deadline import Deadline
    from routegate.core.agent import RoutingAgent
    from routegate.core.compose import GroundedComposer
    from routegate.core.context import RunContext
    from routegate.core.contracts import (
        ABSENT,
        ArgLimits,
        Budget,
        DelegationLedger,
        HistoryEntry,
        RouteIntent,
        RouteProposal,
        RouteSpec,
        RunResult,
        TraceEntry,
    )
    from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent, RunEvent
    from routegate.core.gateway import DelegationStop, RouteGateway
    from routegate.core.governed import Delegated, GovernedStep, Stopped
    from routegate.core.outcome import Outcome
    from routegate.core.policy import RoutePolicy, RouteRejection
    from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
    from routegate.core.provenance import From, ProvenanceLedger, Sensitive, Source, links_only_from
    from routegate.core.workers import NormalizedText, TicketArgs, Worker, WorkerArgs, worker

__all__ = [
    "ABSENT",
    "ArgLimits",
    "Budget",
    "Deadline",
    "DecisionEvent",
    "Delegated",
    "DelegationEvent",
    "DelegationLedger",
    "DelegationStop",
    "FinalAnswer",
    "FinalEvent",
    "FinalizeRequest",
    "Finalizer",
    "From",
    "GovernedStep",
    "GroundedComposer",
    "HistoryEntry",
    "NormalizedText",
    "ObservationEvent",
    "Outcome",
    "ProvenanceLedger",
    "RouteDecision",
    "RouteGateway",
    "RouteIntent",
    "RoutePolicy",
    "RouteProposal",
    "RouteRejection",
    "RouteRequest",
    "RouteSpec",
    "Router",
    "RoutingAgent",
    "RunContext",
    "RunEvent",
    "RunResult",
    "Sensitive",
    "Source",
    "Stopped",
    "TicketArgs",
    "TraceEntry",
    "Worker",
    "WorkerArgs",
    "links_only_from",
    "stop_reasons",
    "worker",
]

_WHERE = {
    "ABSENT": "contracts",
    "ArgLimits": "contracts",
    "Budget": "contracts",
    "Deadline": "_deadline",
    "DecisionEvent": "events",
    "Delegated": "governed",
    "DelegationEvent": "events",
    "DelegationLedger": "contracts",
    "DelegationStop": "gateway",
    "FinalAnswer": "protocols",
    "FinalEvent": "events",
    "FinalizeRequest": "protocols",
    "Finalizer": "protocols",
    "From": "provenance",
    "GovernedStep": "governed",
    "GroundedComposer": "compose",
    "HistoryEntry": "contracts",
    "NormalizedText": "workers",
    "ObservationEvent": "events",
    "Outcome": "outcome",
    "ProvenanceLedger": "provenance",
    "RouteDecision": "protocols",
    "RouteGateway": "gateway",
    "RouteIntent": "contracts",
    "RoutePolicy": "policy",
    "RouteProposal": "contracts",
    "RouteRejection": "policy",
    "RouteRequest": "protocols",
    "RouteSpec": "contracts",
    "Router": "protocols",
    "RoutingAgent": "agent",
    "RunContext": "context",
    "RunEvent": "events",
    "RunResult": "contracts",
    "Sensitive": "provenance",
    "Source": "provenance",
    "Stopped": "governed",
    "TicketArgs": "workers",
    "TraceEntry": "contracts",
    "Worker": "workers",
    "WorkerArgs": "workers",
    "links_only_from": "provenance",
    "stop_reasons": "stop_reasons",
    "worker": "workers",
}


__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__)
