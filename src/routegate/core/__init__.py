"""routegate.core: contracts, policy boundary, gateway and the governed routing agent."""

from routegate.core import stop_reasons
from routegate.core._deadline import Deadline
from routegate.core._sync import run_sync
from routegate.core.agent import RoutingAgent
from routegate.core.compose import GroundedComposer, compose_answer
from routegate.core.context import RunContext
from routegate.core.contracts import (
    ABSENT,
    ArgLimits,
    Budget,
    DelegationLedger,
    HistoryEntry,
    RouteIntent,
    RouteSpec,
    RunResult,
    TraceEntry,
    jsonable,
)
from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent, RunEvent
from routegate.core.gateway import DelegationStop, RouteGateway
from routegate.core.governed import Delegated, GovernedStep, ObservationCheck, Stopped
from routegate.core.hashing import args_hash
from routegate.core.outcome import Outcome
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
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
    "GovernedStep",
    "GroundedComposer",
    "HistoryEntry",
    "NormalizedText",
    "ObservationCheck",
    "ObservationEvent",
    "Outcome",
    "RouteDecision",
    "RouteGateway",
    "RouteIntent",
    "RoutePolicy",
    "RouteRejection",
    "RouteRequest",
    "RouteSpec",
    "Router",
    "RoutingAgent",
    "RunContext",
    "RunEvent",
    "RunResult",
    "Stopped",
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
