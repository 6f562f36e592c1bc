"""The cascade: rules → semantic → an LLM router only when the cheaper stages are unsure.

1. **rules** (a :class:`~routegate.routers.rules.KeywordRouter`, optional) settle the request when exactly one
   allowed route has the most signal words (at least ``rules_min_hits``);
2. **semantic** (a :class:`~routegate.routers.semantic.SemanticRouter`) settles it when its outcome is ``route``;
3. **llm** (any :class:`~routegate.core.protocols.Router`, optional) is asked only when the semantic stage says
   ``default`` or ``clarify``. If the LLM stage fails (timeout, bad output it raised on, …) the semantic
   decision stands — the cascade degrades to the offline answer instead of ending the run.

The decision's ``decided_by`` is ``<name>:rules|semantic|llm``; ``scores`` and ``why`` carry the scores, margin
and runner-up of the stage that decided and the reason the earlier stages passed.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from routegate.core.protocols import RouteDecision, Router, RouteRequest
from routegate.errors import ConfigurationError, RunStopError
from routegate.routers.rules import KeywordRouter
from routegate.routers.semantic import Routing, SemanticDecision, SemanticRouter, adrive, conversation_of, drive

logger = logging.getLogger(__name__)

Stage = Literal["rules", "semantic", "llm"]


@dataclass(frozen=True, slots=True)
class CascadeDecision:
    """What the offline stages decided (``stage`` is ``rules`` or ``semantic``) — :meth:`CascadeRouter.route`."""

    route: str
    stage: Stage
    outcome: str
    semantic: SemanticDecision | None
    rule_scores: Mapping[str, float]
    why: str


class CascadeRouter:
    """Rules, then semantic, then (only when unsure) an LLM router; implements the core ``Router`` protocol."""

    def __init__(
        self,
        *,
        semantic: SemanticRouter,
        rules: KeywordRouter | None = None,
        llm: Router | None = None,
        rules_min_hits: int = 1,
        name: str = "cascade",
    ) -> None:
        if rules_min_hits < 1:
            raise ConfigurationError(f"rules_min_hits must be >= 1, got {rules_min_hits}")
        self.semantic = semantic
        self.rules = rules
        self.llm = llm
        self.rules_min_hits = rules_min_hits
        self.name = name

    def _rule_winner(self, text: str, allowed: Collection[str] | None) -> tuple[str | None, dict[str, float], str]:
        if self.rules is None:
            return None, {}, "no rules"
        scores = {t: s for t, s in self.rules.score(text).items() if allowed is None or t in allowed}
        if not scores:
            return None, scores, "no allowed rule route"
        best = max(scores.values())
        leaders = [t for t, s in scores.items() if s == best]
        if best < self.rules_min_hits:
            return None, scores, "no signal word"
        if len(leaders) > 1:
            return None, scores, f"rules tie between {', '.join(leaders)}"
        return leaders[0], scores, f"{best:g} signal word(s) for {leaders[0]}"

    def route(
        self,
        text: str,
        *,
        context: Sequence[object] = (),
        previous_route: str | None = None,
        allowed: Collection[str] | None = None,
    ) -> CascadeDecision:
        """The offline stages only (rules, then semantic); the LLM stage needs :meth:`decide`."""
        steps = self._offline(text, context=context, previous_route=previous_route, allowed=allowed)
        return drive(steps, self.semantic.encoder)

    async def aroute(
        self,
        text: str,
        *,
        context: Sequence[object] = (),
        previous_route: str | None = None,
        allowed: Collection[str] | None = None,
    ) -> CascadeDecision:
        """:meth:`route` for coroutines (the semantic stage's encoder runs off the event loop)."""
        steps = self._offline(text, context=context, previous_route=previous_route, allowed=allowed)
        return await adrive(steps, self.semantic.encoder)

    def _offline(
        self,
        text: str,
        *,
        context: Sequence[object],
        previous_route: str | None,
        allowed: Collection[str] | None,
    ) -> Routing[CascadeDecision]:
        winner, rule_scores, rule_why = self._rule_winner(text, allowed)
        if winner is not None:
            return CascadeDecision(winner, "rules", "route", None, rule_scores, rule_why)
        decision = yield from self.semantic.routing(
            text, context=context, previous_route=previous_route, allowed=allowed
        )
        return _semantic_stage(decision, rule_scores, rule_why)

    async def decide(self, request: RouteRequest) -> RouteDecision:
        allowed = {spec.name for spec in request.catalog} - request.forbidden_targets
        conversation, previous = conversation_of(request)
        offline = await self.aroute(request.goal, context=conversation, previous_route=previous, allowed=allowed)
        if offline.stage == "rules":
            raw = {"kind": "route", "target": offline.route, "args": dict(self.semantic.args_builder(request))}
            return RouteDecision(
                raw=raw, decided_by=f"{self.name}:rules", scores=dict(offline.rule_scores), why=offline.why
            )
        sem = offline.semantic
        assert sem is not None  # the semantic stage always returns its decision
        if sem.outcome == "route" or self.llm is None:
            return self.semantic.to_route_decision(sem, request, allowed=allowed, decided_by=f"{self.name}:semantic")
        unsure = f"semantic unsure ({sem.outcome}): {sem.why}"
        try:
            answer = await self.llm.decide(request)
        except RunStopError as exc:
            logger.info("cascade: LLM stage stopped (%s); the semantic decision stands", exc.stop_reason)
            decision = self.semantic.to_route_decision(
                sem, request, allowed=allowed, decided_by=f"{self.name}:semantic"
            )
            return RouteDecision(
                raw=decision.raw,
                decided_by=decision.decided_by,
                scores=decision.scores,
                why=f"{decision.why}; LLM stage failed ({exc.stop_reason})",
            )
        scores = dict(sem.scores)
        if answer.scores:
            scores.update({f"llm:{k}": v for k, v in answer.scores.items()})
        why = f"{unsure}; llm: {answer.why}" if answer.why else unsure
        return RouteDecision(raw=answer.raw, decided_by=f"{self.name}:llm", scores=scores, why=why)


def _semantic_stage(decision: SemanticDecision, rule_scores: Mapping[str, float], rule_why: str) -> CascadeDecision:
    return CascadeDecision(
        decision.route, "semantic", decision.outcome, decision, rule_scores, f"{rule_why}; {decision.why}"
    )
