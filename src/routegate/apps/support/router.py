"""The Router node: exactly one of POSTGRES | VECTOR | EXTERNAL | LLM per user turn, with the layer that decided.

Layers, cheapest first; the first that settles the route wins:

1. ``rules`` — signal phrases with the spec's priority (:mod:`.rules`);
2. ``semantic`` — nearest route by example utterances, when its best score and margin are high enough
   (:mod:`.semantic`);
3. ``llm`` — the LLM router (``routegate.routers.llm.LLMRouter``), only when a chat model is configured; its
   answer must pass the policy boundary here, or the next layer decides;
4. ``default`` — the LLM route: "Query does not clearly match any route".

The router only decides; the desk's plan passes its decision through the core policy boundary before any node
runs (:class:`~routegate.apps.support.graph.RouterStep`), and the trace records the layer, the scores and why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.apps.support.rules import RuleVerdict, SupportRules
from routegate.apps.support.semantic import EmbeddingLayer
from routegate.core import Budget, NormalizedText, RoutePolicy, RouteRequest, RouteSpec, WorkerArgs
from routegate.core.policy import RouteRejection
from routegate.errors import RunStopError
from routegate.llm.protocol import ChatModel
from routegate.routers.llm import LLMRouter

logger = logging.getLogger(__name__)

SUPPORT_ROUTER_PROMPT: Final = """You are the router of a customer-support assistant.
Classify the user's intent into exactly one route and answer with one JSON object:
{"kind": "route", "target": "<ROUTE>", "args": {"query": "<the user's message, unchanged>"}}
Routes, in priority order (the first that applies wins):
- POSTGRES: customer or ticket data (customers, tickets, accounts, the status of an issue, a customer's city).
- VECTOR: FAQ or support knowledge (how-to questions, password reset, refunds, escalation, policies, guides).
- EXTERNAL: general real-world information not stored internally (weather, temperature, prices, crypto, bitcoin).
- LLM: conversation, questions about this assistant itself, or nothing above applies confidently.
Answer with the JSON object only."""

ROUTE_DESCRIPTIONS: Final[Mapping[SupportRoute, str]] = {
    "POSTGRES": "Customer and ticket data from PostgreSQL (customers, tickets, status, city)",
    "VECTOR": "Help articles and FAQs by semantic search (password reset, refunds, escalation)",
    "EXTERNAL": "Mock external API for general information (weather, crypto prices)",
    "LLM": "Direct answer: conversation, questions about the assistant, anything else",
}
QUERY_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1}},
    "required": ["query"],
    "additionalProperties": False,
}
CATALOG: Final = tuple(RouteSpec(r, ROUTE_DESCRIPTIONS[r], QUERY_SCHEMA) for r in ROUTES)


class QueryArgs(WorkerArgs):
    """The arguments of every route: the user's message as ``query`` (whitespace collapsed, non-blank)."""

    query: NormalizedText


@dataclass(frozen=True, slots=True)
class RouteChoice:
    """One routing decision: the route, the layer that decided, every layer's scores, and why."""

    route: SupportRoute
    layer: str
    scores: Mapping[str, float] = field(default_factory=dict)
    why: str = ""
    runner_up: str | None = None
    margin: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"route": self.route, "layer": self.layer, "scores": dict(self.scores), "why": self.why}
        if self.runner_up is not None:
            out["runner_up"] = self.runner_up
            out["margin"] = self.margin
        return out


class SupportRouter:
    """The support desk's router: rules → semantic → LLM (when configured) → default LLM route."""

    def __init__(
        self,
        *,
        semantic: EmbeddingLayer | None,
        rules: SupportRules | None = None,
        chat_model: ChatModel | None = None,
        policy: RoutePolicy | None = None,
    ) -> None:
        self.rules = rules or SupportRules()
        self.semantic = semantic
        self.llm_router = LLMRouter(chat_model, system_prompt=SUPPORT_ROUTER_PROMPT) if chat_model else None
        self.policy = policy or RoutePolicy(ROUTES)

    def texts_to_embed(self, text: str, verdict: RuleVerdict | None = None) -> tuple[str, ...]:
        """What a turn on ``text`` will embed, as far as the rules can tell before it runs: the message itself when
        the rules leave it to the embedding layer, the knowledge-base query when they route it to VECTOR.
        ``verdict``: the rules' verdict on ``text`` if the caller has it already."""
        route = (verdict or self.rules.match(text)).route
        if route is None:
            return (text,) if self.semantic is not None else ()
        if route == "VECTOR":
            return (" ".join(text.split()),)  # the query the vector tool gets (QueryArgs collapses whitespace)
        return ()

    async def choose(
        self, text: str, history: Sequence[str] = (), *, verdict: RuleVerdict | None = None
    ) -> RouteChoice:
        """Decide the route for one message (no tool runs here); ``history``: earlier user messages; ``verdict``:
        the rules' verdict on ``text`` if the caller has it already (it is a pure function of the text)."""
        verdict = verdict or self.rules.match(text)
        scores: dict[str, float] = {f"rules:{r}": s for r, s in verdict.scores.items() if s}
        if verdict.route is not None:
            return RouteChoice(verdict.route, "rules", scores, verdict.why)
        why = verdict.why
        runner_up: str | None = None
        margin: float | None = None
        clarify = False
        if self.semantic is not None:
            semantic = await self.semantic.adecide(text, history)  # the encoder runs off the event loop
            scores.update({f"semantic:{r}": s for r, s in semantic.scores.items()})
            runner_up, margin = semantic.runner_up, semantic.margin
            if semantic.route is not None:
                return RouteChoice(semantic.route, "semantic", scores, semantic.why, runner_up, margin)
            why = f"{why}; semantic abstained ({semantic.outcome}): {semantic.why}"
            clarify = semantic.outcome == "clarify"
        if self.llm_router is not None:
            chosen = await self._ask_llm(text)
            if not isinstance(chosen, RouteRejection):
                why = f"{why}; llm chose {chosen}"
                return RouteChoice(chosen, "llm", scores, why, runner_up, margin)
            why = f"{why}; llm answer refused ({chosen.stop_reason})"
        if clarify:
            # in scope but torn between two routes: the LLM node asks ("conversational or clarifying questions")
            return RouteChoice("LLM", "clarify", scores, f"{why}; asking the user", runner_up, margin)
        return RouteChoice("LLM", "default", scores, f"{why}; no route matches confidently", runner_up, margin)

    async def _ask_llm(self, text: str) -> SupportRoute | RouteRejection:
        assert self.llm_router is not None
        request = RouteRequest(goal=text, catalog=CATALOG, budget=Budget(max_route_attempts=1, max_delegations=1))
        try:
            decision = await self.llm_router.decide(request)
        except RunStopError as stop:
            logger.warning("LLM router stopped with %s; falling back to the default route", stop.stop_reason)
            return RouteRejection(stop.stop_reason, stop.message)
        verdict = self.policy.validate(decision.raw)
        if isinstance(verdict, RouteRejection):
            return verdict
        for route in ROUTES:
            if route == verdict.target:
                return route
        return RouteRejection("invalid_route:route_not_allowed", f"{verdict.target!r} is not a support route")
