"""The cascade: rules → semantic → an LLM router only when the cheaper stages are unsure.

1. **rules** (optional) settle the request when they name one allowed route: a
   :class:`~routegate.routers.rules.KeywordRouter` (the route with the most signal words, at least
   ``rules_min_hits``, no tie) or any :class:`RuleStage` (an application's own phrase rules with priorities);
2. **semantic** (a :class:`SemanticStage`: a :class:`~routegate.routers.semantic.SemanticRouter`, or an
   application's own embedding layer that speaks the same steps) settles it when its outcome is ``route``;
3. **llm** (any :class:`~routegate.core.protocols.Router`, optional) is asked only when the semantic stage says
   ``default`` or ``clarify``. Its answer is untrusted: with ``llm_policy`` it must pass that policy here. If the
   LLM stage fails (timeout, bad output it raised on, …) or its answer is refused, the semantic decision stands —
   the cascade degrades to the offline answer instead of ending the run.

The decision's ``decided_by`` is ``<name>:rules|semantic|llm``; ``scores`` and ``why`` carry the scores, margin
and runner-up of the stage that decided and the reason the earlier stages passed. :meth:`CascadeRouter.choose`
gives the whole account (:class:`CascadeChoice`) for callers that show it, such as the support desk.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from routegate.core.contracts import RouteProposal
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import RouteDecision, Router, RouteRequest
from routegate.errors import ConfigurationError, RunStopError
from routegate.routers._stepped import Routing, RoutingQuery, SteppedRouter
from routegate.routers.rules import ArgsBuilder, KeywordRouter
from routegate.routers.semantic import SemanticDecision, conversation_of

if TYPE_CHECKING:
    from routegate.embed.protocol import Encoder

logger = logging.getLogger(__name__)

Stage = Literal["rules", "semantic", "llm"]


class RuleVerdict(Protocol):
    """What a rule stage found: the route it settles (``None`` = it abstains), its scores and why."""

    @property
    def route(self) -> str | None: ...

    @property
    def scores(self) -> Mapping[str, float]: ...

    @property
    def why(self) -> str: ...


class RuleStage(Protocol):
    """The first stage: deterministic rules. ``allowed``: the routes the request may take (``None``: all)."""

    def settle(self, text: str, allowed: Collection[str] | None) -> RuleVerdict: ...


class SemanticStage(Protocol):
    """The second stage: an embedding router, as steps (it yields the texts it needs embedded, :data:`Routing`)
    so the cascade embeds them on the caller's thread or off the event loop. ``SemanticRouter`` is one."""

    @property
    def encoder(self) -> Encoder: ...

    @property
    def args_builder(self) -> ArgsBuilder: ...

    def routing(self, query: RoutingQuery) -> Routing[SemanticDecision]: ...

    def to_route_decision(
        self, decision: SemanticDecision, request: RouteRequest, *, allowed: Collection[str], decided_by: str = ""
    ) -> RouteDecision: ...


@dataclass(frozen=True, slots=True)
class KeywordVerdict:
    route: str | None
    scores: Mapping[str, float]
    why: str


class KeywordRules:
    """A :class:`KeywordRouter` as a rule stage: the allowed route with the most signal words settles the request
    when it has at least ``min_hits`` and no other route ties with it."""

    def __init__(self, router: KeywordRouter, *, min_hits: int = 1) -> None:
        if min_hits < 1:
            raise ConfigurationError(f"rules_min_hits must be >= 1, got {min_hits}")
        self.router = router
        self.min_hits = min_hits

    def settle(self, text: str, allowed: Collection[str] | None) -> KeywordVerdict:
        scores = {t: s for t, s in self.router.score(text).items() if allowed is None or t in allowed}
        if not scores:
            return KeywordVerdict(None, scores, "no allowed rule route")
        best = max(scores.values())
        leaders = [t for t, s in scores.items() if s == best]
        if best < self.min_hits:
            return KeywordVerdict(None, scores, "no signal word")
        if len(leaders) > 1:
            return KeywordVerdict(None, scores, f"rules tie between {', '.join(leaders)}")
        return KeywordVerdict(leaders[0], scores, f"{best:g} signal word(s) for {leaders[0]}")


@dataclass(frozen=True, slots=True)
class CascadeDecision:
    """What the offline stages decided (``stage`` is ``rules`` or ``semantic``) — :meth:`CascadeRouter.route`."""

    route: str
    stage: Stage
    outcome: str
    semantic: SemanticDecision | None
    rule_scores: Mapping[str, float]
    why: str


@dataclass(frozen=True, slots=True)
class CascadeChoice:
    """The whole account of one cascade decision (:meth:`CascadeRouter.choose`).

    ``decision``: what :meth:`~CascadeRouter.decide` returns (untrusted until the caller's policy checks it).
    ``stage``: the stage that decided. ``target``: the route it chose, as far as the cascade knows it (``None``
    when an LLM stage without ``llm_policy`` decided: its raw answer is unchecked). ``offline``: the rules and
    semantic stages' decision. ``llm_note``: why the LLM stage did not decide, when it was asked and did not;
    ``llm_stop``: the stop reason when that was because the LLM stage failed."""

    decision: RouteDecision
    stage: Stage
    target: str | None
    offline: CascadeDecision
    llm_note: str | None = None
    llm_stop: str | None = None

    @property
    def outcome(self) -> str:
        """``route`` when a stage settled the request; the semantic stage's ``default``/``clarify`` when it stood
        unsure (no LLM stage, or the LLM stage failed or was refused)."""
        return "route" if self.stage != "semantic" else self.offline.outcome


class CascadeRouter(SteppedRouter[CascadeDecision]):
    """Rules, then semantic, then (only when unsure) an LLM router; implements the core ``Router`` protocol."""

    def __init__(
        self,
        *,
        semantic: SemanticStage,
        rules: KeywordRouter | RuleStage | None = None,
        llm: Router | None = None,
        llm_policy: RoutePolicy | None = None,
        rules_min_hits: int = 1,
        name: str = "cascade",
    ) -> None:
        if rules_min_hits < 1:
            raise ConfigurationError(f"rules_min_hits must be >= 1, got {rules_min_hits}")
        self.semantic = semantic
        self.encoder = semantic.encoder
        self.rules: RuleStage | None = (
            KeywordRules(rules, min_hits=rules_min_hits) if isinstance(rules, KeywordRouter) else rules
        )
        self.llm = llm
        self.llm_policy = llm_policy
        self.name = name

    def _rule_verdict(self, text: str, allowed: Collection[str] | None) -> tuple[str | None, Mapping[str, float], str]:
        if self.rules is None:
            return None, {}, "no rules"
        verdict = self.rules.settle(text, allowed)
        if verdict.route is not None and allowed is not None and verdict.route not in allowed:
            return None, verdict.scores, f"{verdict.why}; {verdict.route} is not allowed here"
        return verdict.route, verdict.scores, verdict.why

    def routing(self, query: RoutingQuery) -> Routing[CascadeDecision]:
        """The offline stages as steps (rules, then semantic); :meth:`route` / :meth:`aroute` drive them, the LLM
        stage needs :meth:`decide`."""
        winner, rule_scores, rule_why = self._rule_verdict(query.text, query.allowed)
        if winner is not None:
            return CascadeDecision(winner, "rules", "route", None, rule_scores, rule_why)
        decision = yield from self.semantic.routing(query)
        return CascadeDecision(
            decision.route, "semantic", decision.outcome, decision, rule_scores, f"{rule_why}; {decision.why}"
        )

    async def decide(self, request: RouteRequest) -> RouteDecision:
        return (await self.choose(request)).decision

    async def choose(self, request: RouteRequest) -> CascadeChoice:
        """:meth:`decide` with the whole account of the stages (:class:`CascadeChoice`)."""
        allowed = {spec.name for spec in request.catalog} - request.forbidden_targets
        conversation, previous = conversation_of(request)
        offline = await self.aroute(request.goal, context=conversation, previous_route=previous, allowed=allowed)
        if offline.stage == "rules":
            decision = RouteDecision.proposed(
                offline.route,
                dict(self.semantic.args_builder(request)),
                decided_by=f"{self.name}:rules",
                scores=dict(offline.rule_scores),
                why=offline.why,
            )
            return CascadeChoice(decision, "rules", offline.route, offline)
        sem = offline.semantic
        assert sem is not None  # the semantic stage always returns its decision
        if sem.outcome == "route" or self.llm is None:
            return self._semantic_choice(request, offline, sem, allowed)
        try:
            answer = await self.llm.decide(request)
        except RunStopError as exc:
            logger.info("cascade: LLM stage stopped (%s); the semantic decision stands", exc.stop_reason)
            note = f"LLM stage failed ({exc.stop_reason})"
            return replace(self._semantic_choice(request, offline, sem, allowed, note), llm_stop=exc.stop_reason)
        target: str | None = None
        if self.llm_policy is not None:
            verdict = self.llm_policy.validate(answer.raw)
            if isinstance(verdict, RouteRejection):
                note = f"LLM stage's answer refused ({verdict.stop_reason})"
                return self._semantic_choice(request, offline, sem, allowed, note)
            target = verdict.target
        scores = dict(sem.scores)
        if answer.scores:
            scores.update({f"llm:{k}": v for k, v in answer.scores.items()})
        unsure = f"semantic unsure ({sem.outcome}): {sem.why}"
        why = f"{unsure}; llm: {answer.why}" if answer.why else unsure
        decision = RouteDecision(raw=answer.raw, decided_by=f"{self.name}:llm", scores=scores, why=why)
        return CascadeChoice(decision, "llm", target, offline)

    def _semantic_choice(
        self,
        request: RouteRequest,
        offline: CascadeDecision,
        sem: SemanticDecision,
        allowed: Collection[str],
        llm_note: str | None = None,
    ) -> CascadeChoice:
        decision = self.semantic.to_route_decision(sem, request, allowed=allowed, decided_by=f"{self.name}:semantic")
        if llm_note is not None:
            decision = RouteDecision(decision.raw, decision.decided_by, decision.scores, f"{decision.why}; {llm_note}")
        raw = decision.raw
        # built by the stage itself: trusted (typed, or raw from a stage of one's own)
        target = (
            raw.target if isinstance(raw, RouteProposal) else raw.get("target") if isinstance(raw, Mapping) else None
        )
        return CascadeChoice(decision, "semantic", target if isinstance(target, str) else None, offline, llm_note)
