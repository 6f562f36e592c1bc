"""Events a run emits while it runs, in order: decision, delegation, observation (per attempt), then final.

:class:`FinalEvent` is every runtime's last event (the routing agent's and a Plan's): it carries the run's
:class:`~routegate.core.RunResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from routegate.core._fields import fields_dict
from routegate.core.contracts import RouteIntent, jsonable
from routegate.core.protocols import RouteDecision
from routegate.core.result import AgentResult, RunResult

ResultT = TypeVar("ResultT", bound=RunResult[Any], default=RunResult[Any], covariant=True)


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
class _AttemptEvent:
    """What happens to route attempt ``attempt`` at ``target``; its JSON form leads with its ``type``."""

    attempt: int
    target: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": getattr(self, "type")} | fields_dict(self)  # noqa: B009  # each subclass declares ``type``


@dataclass(frozen=True, slots=True)
class DelegationEvent(_AttemptEvent):
    """The gateway is about to call ``target``."""

    args_hash: str
    type: str = "delegation"


@dataclass(frozen=True, slots=True)
class ObservationEvent(_AttemptEvent):
    """The worker returned (``observation`` is what it returned, possibly out of contract)."""

    observation: object
    type: str = "observation"

    def to_dict(self) -> dict[str, Any]:
        return _AttemptEvent.to_dict(self) | {"observation": jsonable(self.observation)}  # slots: no super()


@dataclass(frozen=True, slots=True)
class FinalEvent(Generic[ResultT]):
    """The run ended; always the last event. ``result`` is how it ended: an
    :class:`~routegate.core.AgentResult` from the routing agent, a :class:`~routegate.plan.PlanResult` from a Plan,
    the support desk's ``TurnResult``: each a :class:`~routegate.core.RunResult`."""

    result: ResultT
    type: str = "final"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "result": self.result.to_dict()}


RunEvent = DecisionEvent | DelegationEvent | ObservationEvent | FinalEvent[AgentResult]
