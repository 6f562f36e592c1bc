"""Events a run emits while it runs, in order: decision, delegation, observation (per attempt), then final."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from routegate.core._fields import fields_dict
from routegate.core.contracts import RouteIntent, RunResult, jsonable
from routegate.core.protocols import RouteDecision


@dataclass(frozen=True, slots=True)
class DecisionEvent:
    """The router answered and the policy boundary judged it (``intent`` is None when refused)."""

    attempt: int
    decision: RouteDecision
    intent: RouteIntent | None
    rejection: str | None = None
    type: str = "decision"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "attempt": self.attempt,
            "raw_route": jsonable(self.decision.raw),
            "decided_by": self.decision.decided_by,
            "scores": jsonable(self.decision.scores),
            "why": self.decision.why,
            "route": self.intent.to_dict() if self.intent else None,
            "rejection": self.rejection,
        }


@dataclass(frozen=True, slots=True)
class DelegationEvent:
    """The gateway is about to call ``target``."""

    attempt: int
    target: str
    args_hash: str
    type: str = "delegation"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type} | fields_dict(self)


@dataclass(frozen=True, slots=True)
class ObservationEvent:
    """The worker returned (``observation`` is what it returned, possibly out of contract)."""

    attempt: int
    target: str
    observation: object
    type: str = "observation"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type} | fields_dict(self) | {"observation": jsonable(self.observation)}


class _Result(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


_ResultT = TypeVar("_ResultT", bound=_Result)


@dataclass(frozen=True, slots=True)
class _FinalEvent(Generic[_ResultT]):
    """The last event of a run, whichever runtime ran it: the run's result."""

    result: _ResultT
    type: str = "final"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "result": self.result.to_dict()}


@dataclass(frozen=True, slots=True)
class FinalEvent(_FinalEvent[RunResult]):
    """The run ended; always the last event."""


RunEvent = DecisionEvent | DelegationEvent | ObservationEvent | FinalEvent
