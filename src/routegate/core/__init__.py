"""routegate.core: contracts, policy boundary, gateway and the governed routing agent."""

from routegate.core import stop_reasons
from routegate.core._sync import run_sync
from routegate.core.agent import RoutingAgent
from routegate.core.compose import GroundedComposer, compose_answer
from routegate.core.contracts import (
    ABSENT,
    ArgLimits,
    Budget,
    HistoryEntry,
    RouteIntent,
    RouteSpec,
    RunResult,
    TraceEntry,
    jsonable,
)
from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent, RunEvent
from routegate.core.gateway import DelegationLedger, DelegationStop, RouteGateway
from routegate.core.hashing import args_hash
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
from routegate.core.workers import NormalizedText, TicketArgs, Worker, WorkerArgs, worker

__all__ = [
    "ABSENT",
    "ArgLimits",
    "Budget",
    "DecisionEvent",
    "DelegationEvent",
    "DelegationLedger",
    "DelegationStop",
    "FinalAnswer",
    "FinalEvent",
    "FinalizeRequest",
    "Finalizer",
    "GroundedComposer",
    "HistoryEntry",
    "NormalizedText",
    "ObservationEvent",
    "RouteDecision",
    "RouteGateway",
    "RouteIntent",
    "RoutePolicy",
    "RouteRejection",
    "RouteRequest",
    "RouteSpec",
    "Router",
    "RoutingAgent",
    "RunEvent",
    "RunResult",
    "TicketArgs",
    "TraceEntry",
    "Worker",
    "WorkerArgs",
    "args_hash",
    "compose_answer",
    "jsonable",
    "run_sync",
    "stop_reasons",
    "worker",
]
