"""The injectable parts of a governed run: routers and finalizers, each behind one small protocol."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from routegate.core.contracts import Budget, HistoryEntry, RouteProposal, RouteSpec, jsonable


@dataclass(slots=True)
class RouteRequest:
    """What a router sees when it decides: the goal, the catalogue of allowed routes and the run so far.

    ``conversation`` holds the earlier user messages of a conversation (oldest first) and ``previous_route`` the
    route of the previous turn, for routers that resolve follow-ups ("and the other one?"); a single-shot run
    leaves them empty. ``context`` is the caller's own data, passed through untouched. ``task`` is the
    instruction of the plan step that runs the agent (``Step(agent, task=...)``); ``None`` outside a plan.
    """

    goal: str
    catalog: tuple[RouteSpec, ...]
    history: tuple[HistoryEntry, ...] = ()
    forbidden_targets: frozenset[str] = frozenset()
    attempt: int = 1
    budget: Budget = field(default_factory=Budget)
    context: Mapping[str, Any] = field(default_factory=dict)
    conversation: tuple[str, ...] = ()
    previous_route: str | None = None
    task: str | None = None

    @property
    def remaining_attempts(self) -> int:
        return self.budget.max_route_attempts - self.attempt + 1

    def state_summary(self) -> dict[str, Any]:
        """A compact summary of earlier attempts (routes used, last target and observation)."""
        targets = [entry.route.target for entry in self.history]
        last = self.history[-1] if self.history else None
        return {
            "attempts_completed": len(self.history),
            "routes_used_unique": list(dict.fromkeys(targets)),
            "last_route_target": targets[-1] if targets else None,
            "last_observation_status": last.status if last else None,
            "last_observation": jsonable(last.observation) if last else None,
        }


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """A router's answer. ``raw`` is untrusted (a dict, JSON text, anything) and goes through the policy
    boundary; a router that builds its answer itself proposes it typed (:meth:`proposed`: ``raw`` is then a
    :class:`~routegate.core.contracts.RouteProposal`, checked the same way). ``decided_by``, ``scores`` and ``why``
    are the router's own account of its decision for the trace.
    """

    raw: object
    decided_by: str = ""
    scores: Mapping[str, float] | None = None
    why: str = ""

    @classmethod
    def proposed(
        cls,
        target: str,
        args: Mapping[str, Any],
        *,
        decided_by: str = "",
        scores: Mapping[str, float] | None = None,
        why: str = "",
    ) -> RouteDecision:
        """A trusted router's decision as a typed :class:`~routegate.core.contracts.RouteProposal` (``raw``): the
        policy checks its target and args as it checks the raw form, without parsing a shape first."""
        return cls(RouteProposal(target, args), decided_by, scores, why)


@runtime_checkable
class Router(Protocol):
    """Decides which route should handle a request. May raise :class:`~routegate.errors.RunStopError`."""

    async def decide(self, request: RouteRequest) -> RouteDecision: ...


@dataclass(slots=True)
class FinalizeRequest:
    """What a finalizer sees: the goal, the route that completed and the evidence gathered; ``task`` as in
    :class:`RouteRequest` (the plan step's instruction, ``None`` outside a plan)."""

    goal: str
    selected_route: str
    history: tuple[HistoryEntry, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    task: str | None = None

    @property
    def observation(self) -> Mapping[str, Any]:
        return self.history[-1].observation if self.history else {}


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """A final answer with structured data for the caller: ``extra`` lands on ``AgentResult.extra`` (and in its
    JSON view), e.g. what a technique dispatch did with the answer. A finalizer may return this or plain text."""

    text: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Finalizer(Protocol):
    """Composes the final answer from the evidence; calls no worker. May raise ``RunStopError``."""

    async def finalize(self, request: FinalizeRequest) -> str | FinalAnswer: ...
