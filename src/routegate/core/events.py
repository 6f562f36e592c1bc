"""Events a run emits while it runs, in order: decision, delegation, observation (per attempt), then final."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
        return {
            "type": self.type,
            "attempt": self.attempt,
            "target": self.target,
            "args_hash": self.args_hash,
        }


@dataclass(frozen=True, slots=True)
class ObservationEvent:
    """The worker returned (``observation`` is what it returned, possibly out of contract)."""

    attempt: int
    target: str
    observation: object
    type: str = "observation"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "attempt": self.attempt,
            "target": self.target,
            "observation": jsonable(self.observation),
        }


@dataclass(frozen=True, slots=True)
class FinalEvent:
    """The run ended; always the last event."""

    result: RunResult
    type: str = "final"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "result": self.result.to_dict()}


RunEvent = DecisionEvent | DelegationEvent | ObservationEvent | FinalEvent
