"""The Router node: exactly one of POSTGRES | VECTOR | EXTERNAL | LLM per user turn, with the layer that decided.

:class:`SupportRouter` is a configuration of the generic :class:`routegate.routers.CascadeRouter` (it implements
the core ``Router`` protocol), built from the desk's configuration (its routes, phrases and examples; the built-in
desk's by default). Its stages, cheapest first, the first that settles the route wins:

1. ``rules`` — signal phrases with the spec's priority (:mod:`.rules`);
2. ``semantic`` — nearest route by example utterances, when the embedding layer is sure enough
   (:mod:`.semantic`);
3. ``llm`` — the LLM router (``routegate.routers.llm.LLMRouter``, with a prompt written from the configuration:
   :func:`router_prompt`), only when a chat model is configured; its answer must pass the desk's policy, or the
   embedding layer's unsure answer stands;
4. unsure — the LLM route, which answers ("Query does not clearly match any route": layer ``default``) or asks
   back when two routes are close (layer ``clarify``).

A route the desk does not have (a configuration without tools, say) is not in the request's catalog, so no stage
can choose it. Around them, the "I don't know" gate (layer ``unsure``: the LLM route, answered offline with a clarifying
question): SQL or code pasted in goes there before any stage runs (:func:`.unsure.pasted_shape`); a message that
is not English (:func:`.unsure.is_not_english`) goes there unless the rules decided it; and so does a route the
embedding layer chose with a margin over the runner-up under its ``unsure_margin`` (tuned on the labelled sets'
validation splits, ``docs/benchmarks/support.md``).

The router only decides; the desk's plan passes its decision through the core policy boundary before any node
runs (:class:`~routegate.apps.support.graph.RouterStep`), and the trace records the layer, the scores and why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from routegate.apps.configured.config import DeskConfig
from routegate.apps.configured.routes import builtin_config, present_routes, route_examples
from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.apps.support.rules import RuleVerdict, SupportRules
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer
from routegate.apps.support.unsure import is_not_english, pasted_shape
from routegate.apps.support.vector_cache import VectorCache
from routegate.core import Budget, RouteDecision, RoutePolicy, RouteRequest, WorkerArgs
from routegate.core.contracts import HistoryEntry, RouteSpec
from routegate.core.workers import NormalizedText
from routegate.embed import Encoder
from routegate.errors import RunStopError
from routegate.llm.protocol import ChatModel
from routegate.routers.cascade import CascadeChoice, CascadeRouter
from routegate.routers.llm import LLMRouter

logger = logging.getLogger(__name__)

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
    llm_stop: str | None = None  # the LLM stage's stop reason when it failed (the offline stages decided)
    embedding_failed: bool = False  # the embedding layer raised: the rules alone decided (or nothing did)

    def decision(self, text: str) -> RouteDecision:
        """This choice as the route decision the desk's policy checks: the route, proposed typed, with the message
        as its ``query``; the layer, scores and why for the trace."""
        return RouteDecision.proposed(
            self.route, {"query": text}, decided_by=self.layer, scores=dict(self.scores) or None, why=self.why
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"route": self.route, "layer": self.layer, "scores": dict(self.scores), "why": self.why}
        if self.runner_up is not None:
            out["runner_up"] = self.runner_up
            out["margin"] = self.margin
        if self.llm_stop is not None:
            out["llm_failed"] = self.llm_stop
        if self.embedding_failed:
            out["embedding_failed"] = True
        return out


class SupportRouter(CascadeRouter):
    """The desk's router: rules → embedding layer → LLM router (when configured) → the LLM route.

    A :class:`~routegate.routers.CascadeRouter` with the desk's stages, built from ``config`` (the built-in desk's
    when ``None``): the rules are its phrases (:meth:`SupportRules.of`, unless ``rules`` is given), the routes it
    may choose are those it has (:func:`~routegate.apps.configured.routes.present_routes`: the request's catalog
    and the default ``policy``), the LLM router's prompt is written from it (:func:`router_prompt`).
    :meth:`route_choice` gives its decision as the desk shows it (:class:`RouteChoice`).
    """

    rules: SupportRules

    def __init__(
        self,
        config: DeskConfig | None = None,
        *,
        semantic: EmbeddingLayer,
        rules: SupportRules | None = None,
        chat_model: ChatModel | None = None,
        policy: RoutePolicy | None = None,
        unsure_margin: float | None = None,
    ) -> None:
        config = config or builtin_config()
        present = present_routes(config)
        self.present = frozenset(present)
        self.catalog = tuple(spec for spec in CATALOG if spec.name in self.present)
        self.policy = policy or RoutePolicy(present)
        # the gate's margin: the embedding layer's own (tuned for its scores) unless given
        margin = getattr(semantic, "unsure_margin", 0.0) if unsure_margin is None else unsure_margin
        self.unsure_margin = float(margin) if isinstance(margin, int | float) else 0.0
        llm = (
            LLMRouter(chat_model, system_prompt=router_prompt(config), mode=config.router.mode) if chat_model else None
        )
        super().__init__(
            semantic=semantic, rules=rules or SupportRules.of(config), llm=llm, llm_policy=self.policy, name="support"
        )

    def texts_to_embed(self, text: str, verdict: RuleVerdict | None = None) -> tuple[str, ...]:
        """What a turn on ``text`` will embed, as far as the rules can tell before it runs: the message itself when
        the rules leave it to the embedding layer, the knowledge-base query when they route it to VECTOR.
        ``verdict``: the rules' verdict on ``text`` if the caller has it already."""
        route = (verdict or self.rules.match(text)).route
        if route is None:
            return (text,)
        if route == "VECTOR":
            return (" ".join(text.split()),)  # the query the vector tool gets (QueryArgs collapses whitespace)
        return ()

    def request_for(self, text: str, history: Sequence[str] = (), refused: Sequence[HistoryEntry] = ()) -> RouteRequest:
        """The route request for one message; ``history``: earlier user messages, oldest first; ``refused``: this
        turn's decisions the desk's policy refused, handed back (their routes are not offered again)."""
        return RouteRequest(
            goal=text,
            catalog=self.catalog,
            budget=_LLM_BUDGET,
            conversation=tuple(history),
            history=tuple(refused),
            forbidden_targets=frozenset(entry.route.target for entry in refused),
        )

    async def route_choice(
        self, text: str, history: Sequence[str] = (), refused: Sequence[HistoryEntry] = ()
    ) -> RouteChoice:
        """Decide the route for one message (no tool runs here); ``history``: earlier user messages; ``refused``:
        the refusals handed back so far this turn (``on_refusal="observe"``)."""
        shape = pasted_shape(text)
        if shape is not None:  # pasted in, not asked: no stage (and no model) is consulted
            return RouteChoice("LLM", UNSURE, {}, f"the message looks like {shape} pasted in; asking the user")
        try:
            choice = _as_route_choice(await self.choose(self.request_for(text, history, refused)))
        except RunStopError:
            raise
        except Exception as exc:  # the rules did not settle it and the embedding layer failed (its encoder)
            logger.warning("the embedding layer failed: %s", type(exc).__name__, exc_info=True)
            why = f"no signal phrase matched; the embedding layer failed ({type(exc).__name__}); no route matches"
            return RouteChoice("LLM", "default", {}, why, embedding_failed=True)
        return self.gate(text, choice)

    def gate(self, text: str, choice: RouteChoice) -> RouteChoice:
        """The "I don't know" gate on a decision of the embedding layer (the rules' and the LLM stage's stand): a
        message not in English goes to the clarifying answer, and so does a route chosen by a margin under
        ``unsure_margin``."""
        if choice.layer not in ("semantic", "default", "clarify"):
            return choice
        if is_not_english(text):
            why = f"{choice.why}; the message is not in English (the routes are): asking the user"
        elif choice.layer == "semantic" and choice.route != "LLM" and _under(choice.margin, self.unsure_margin):
            why = f"{choice.why}; margin {choice.margin:.3f} under {self.unsure_margin:g}: asking the user"
        else:
            return choice
        return RouteChoice("LLM", UNSURE, choice.scores, why, choice.runner_up, choice.margin, choice.llm_stop)


_LLM_BUDGET: Final = Budget(max_route_attempts=1, max_delegations=1)
UNSURE: Final = "unsure"
"""The layer of a decision the "I don't know" gate made: the LLM route, answered with a clarifying question."""


def _under(margin: float | None, limit: float) -> bool:
    return margin is not None and margin < limit


def _as_route_choice(choice: CascadeChoice) -> RouteChoice:
    offline = choice.offline
    scores: dict[str, float] = {f"rules:{r}": s for r, s in offline.rule_scores.items() if s}
    runner_up: str | None = None
    margin: float | None = None
    semantic = offline.semantic
    if semantic is not None:
        scores.update({f"semantic:{r}": round(float(s), 4) for r, s in semantic.scores.items()})
        runner_up, margin = semantic.runner_up, round(float(semantic.margin), 4)
    if choice.stage == "llm":
        why = f"{offline.why}; llm chose {choice.target}"
    else:
        why = offline.why if choice.llm_note is None else f"{offline.why}; {choice.llm_note}"
    route = _support_route(choice.target)
    layer = choice.stage if choice.outcome == "route" else choice.outcome
    if layer == "clarify":
        why = f"{why}; asking the user"
    elif layer == "default":
        why = f"{why}; no route matches confidently"
    return RouteChoice(route, layer, scores, why, runner_up, margin, choice.llm_stop)


def _support_route(target: str | None) -> SupportRoute:
    for route in ROUTES:
        if route == target:
            return route
    return "LLM"  # pragma: no cover - the desk's stages and policy only ever name its routes


def embedding_layer(config: DeskConfig, encoder: Encoder, *, cache: VectorCache | None = None) -> ExampleEmbeddingLayer:
    """The nearest examples of the desk's routes, with its ``[router]`` floor and margin; ``cache``: where their
    vectors are kept between processes (``None``: embedded here)."""
    return ExampleEmbeddingLayer(
        encoder,
        examples=route_examples(config),
        min_score=config.router.min_score,
        min_margin=config.router.min_margin,
        cache=cache,
    )


def router_prompt(config: DeskConfig) -> str:
    """The LLM router's system prompt: the desk's routes in priority order, each said from its configuration."""
    lines = [
        f"You are the router of {config.desk.description or config.desk.name}.",
        "Classify the user's intent into exactly one route and answer with one JSON object:",
        '{"kind": "route", "target": "<ROUTE>", "args": {"query": "<the user\'s message, unchanged>"}}',
        "Routes (the first that applies wins):",
    ]
    for kind, route in (("sql", "POSTGRES"), ("kb", "VECTOR"), ("tool", "EXTERNAL"), ("llm", "LLM")):
        routes = [r for r in config.routes if r.kind == kind]
        if not routes:
            continue
        if kind == "sql":
            what = "records in the database: " + ", ".join(t for r in routes for t in r.tables)
        elif kind == "kb":
            what = "questions answered by the help documents (policies, how-to)"
        elif kind == "tool":
            what = "external tools: " + "; ".join(t.description for t in config.tools)
        else:
            what = "conversation, questions about this assistant, or nothing above applies"
        lines.append(f"- {route}: {what}.")
    lines.append("Answer with the JSON object only.")
    return "\n".join(lines)
