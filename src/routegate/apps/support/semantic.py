"""The embedding layer of the support router: nearest route by example utterances.

Each route has example utterances (written for this layer; none is copied from the labelled evaluation set in
``tests/data/support_routes.jsonl``). They are embedded once when the layer is built. A message's score for a
route is the mean cosine similarity of its ``k`` nearest examples of that route; the layer decides when the best
score reaches ``min_score`` and leads the runner-up by ``min_margin``, and otherwise abstains (the router then
asks the LLM router when one is configured, or answers on the LLM route: "no route matches confidently").

Two implementations of :class:`EmbeddingLayer`:

* :class:`FittedSemanticLayer` — the default of the CLI and the server: ``routegate.routers.semantic.SemanticRouter``
  fitted on the same examples (learned head, calibrated out-of-scope threshold and clarify margin, multi-turn:
  an unsure message is retried with the previous user message). Fitting takes seconds, so the fitted router is
  cached on disk, keyed by the examples, the encoder and the routegate version.
* :class:`ExampleEmbeddingLayer` — nearest examples with a fixed floor and margin: no fitting, built in well under
  a second; the tests' default.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import numpy as np

from routegate import __version__
from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.embed import Encoder, Vectors, encode_async
from routegate.errors import ConfigurationError
from routegate.routers.semantic import SemanticDecision, SemanticRouter

logger = logging.getLogger(__name__)

EXAMPLES: Final[Mapping[SupportRoute, tuple[str, ...]]] = {
    "POSTGRES": (
        "show me the tickets of a customer",
        "what is the current status of this ticket",
        "which city does this customer live in",
        "list every customer in the database",
        "how many tickets are still open",
        "who submitted that ticket",
        "look up a customer by name",
        "details of customer number five",
        "all closed tickets please",
        "tickets filed by Maria",
        "where is Peter Parker based",
        "what problem did the customer report",
        "pull the account record for this client",
        "is the issue I reported resolved yet",
        "which clients are located in Paris",
        "show open support tickets",
        "customer list with their cities",
        "tickets",
        "customers",
        "Maria Garcia",
        "the status of my order 55",
        "what did Bob complain about",
    ),
    "VECTOR": (
        "how can I reset the password on my account",
        "I lost my password",
        "steps to recover access to my login",
        "what are the rules for getting a refund",
        "can I be reimbursed for my purchase",
        "when does a ticket get escalated to senior staff",
        "what is the escalation process",
        "how do I change my email address",
        "how do I cancel my plan",
        "where can I read the help articles",
        "is there a guide for this feature",
        "what does your policy say",
        "how do I close my account",
        "explain how refunds are processed",
        "explain the escalation rules",
        "how do I contact customer support",
        "what are your terms of service",
        "how do I turn on two factor authentication",
        "I want to get my money back",
        "how long do I have to request a refund",
        "frequently asked questions",
        "passwords",
    ),
    "EXTERNAL": (
        "what is the weather going to be like",
        "will it rain today in Berlin",
        "how warm is it outside now",
        "current temperature in Madrid",
        "what is bitcoin trading at",
        "price of crypto coins right now",
        "how much is one ether worth",
        "what is the stock market doing today",
        "latest world news",
        "who won the game yesterday",
        "what is the capital city of Japan",
        "how many people live in Brazil",
        "convert dollars to yen at today's rate",
        "what time is it in New Delhi",
        "how high is the tallest mountain",
        "what is the price of oil today",
        "weather",
        "crypto",
    ),
    "LLM": (
        "hey",
        "good evening",
        "thanks a lot",
        "goodbye",
        "can you assist me",
        "I need assistance",
        "what are you able to do",
        "what is this assistant",
        "how do you work",
        "who made you",
        "are you a human",
        "tell me something funny",
        "compose a short story",
        "what is love",
        "ok cool",
        "I have a question for you",
        "something is not right",
        "can you help me with something",
        "hmm",
        "qwerty zxcv",
        "what should I ask you",
        "sorry",
    ),
}


@dataclass(frozen=True, slots=True)
class SemanticVerdict:
    """The layer's answer: ``route`` is ``None`` when it abstains (``outcome`` says why: default or clarify)."""

    route: SupportRoute | None
    scores: Mapping[str, float]
    best: str
    runner_up: str | None
    margin: float
    why: str
    outcome: str = "route"


class EmbeddingLayer(Protocol):
    """What the router needs from an embedding layer. ``context``: earlier user messages, oldest first."""

    name: str

    def decide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict: ...

    async def adecide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict:
        """``decide`` for the desk's event loop: the encoder must not run on it."""
        ...


class ExampleEmbeddingLayer:
    """Mean of the ``k`` nearest example similarities per route, with a score floor and a margin."""

    name = "semantic"

    def __init__(
        self,
        encoder: Encoder,
        *,
        examples: Mapping[SupportRoute, Sequence[str]] = EXAMPLES,
        k: int = 2,
        min_score: float = 0.45,
        min_margin: float = 0.04,
    ) -> None:
        if k < 1:
            raise ConfigurationError(f"k must be >= 1, got {k}")
        missing = [r for r in ROUTES if not examples.get(r)]
        if missing:
            raise ConfigurationError(f"every route needs example utterances; none for {missing}")
        self._encoder = encoder
        self.k = k
        self.min_score = min_score
        self.min_margin = min_margin
        self._routes = list(ROUTES)
        texts = [t for r in self._routes for t in examples[r]]
        self._labels = np.array([i for i, r in enumerate(self._routes) for _ in examples[r]])
        self._matrix: Vectors = encoder.encode(texts)

    def scores(self, text: str) -> dict[str, float]:
        return self._scores_of(self._encoder.encode([text])[0])

    def _scores_of(self, vector: Vectors) -> dict[str, float]:
        sims = self._matrix @ vector
        out: dict[str, float] = {}
        for index, route in enumerate(self._routes):
            own = np.sort(sims[self._labels == index])[::-1][: self.k]
            out[route] = round(float(own.mean()), 4)
        return out

    async def adecide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict:
        return self._verdict(self._scores_of((await encode_async(self._encoder, [text]))[0]))

    def decide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict:
        return self._verdict(self.scores(text))

    def _verdict(self, scores: dict[str, float]) -> SemanticVerdict:
        ranked = sorted(self._routes, key=lambda r: scores[r], reverse=True)
        best, runner_up = ranked[0], ranked[1]
        margin = round(scores[best] - scores[runner_up], 4)
        if scores[best] < self.min_score:
            return SemanticVerdict(
                None,
                scores,
                best,
                runner_up,
                margin,
                f"best {best} {scores[best]:.2f} < min_score {self.min_score}",
                "default",
            )
        if margin < self.min_margin:
            return SemanticVerdict(
                None,
                scores,
                best,
                runner_up,
                margin,
                f"{best} leads {runner_up} by {margin:.3f} < min_margin {self.min_margin}",
                "clarify",
            )
        return SemanticVerdict(
            best, scores, best, runner_up, margin, f"{best} {scores[best]:.2f}, margin {margin:.2f} over {runner_up}"
        )


def _as_route(name: str) -> SupportRoute | None:
    for route in ROUTES:
        if route == name:
            return route
    return None


class FittedSemanticLayer:
    """``routegate.routers.semantic.SemanticRouter`` over the route examples, as the router's embedding layer."""

    name = "semantic"

    def __init__(self, router: SemanticRouter) -> None:
        missing = set(ROUTES) - set(router.routes)
        if missing:
            raise ConfigurationError(f"the semantic router has no route(s) {sorted(missing)}")
        self.router = router

    @classmethod
    def fit(cls, encoder: Encoder, examples: Mapping[SupportRoute, Sequence[str]] = EXAMPLES) -> FittedSemanticLayer:
        routes: dict[str, list[str]] = {str(route): list(texts) for route, texts in examples.items()}
        return cls(SemanticRouter.from_routes(routes, encoder=encoder, default_route="LLM"))

    @classmethod
    def load_or_fit(
        cls,
        encoder: Encoder,
        cache_dir: Path | None,
        examples: Mapping[SupportRoute, Sequence[str]] = EXAMPLES,
    ) -> FittedSemanticLayer:
        """The fitted router from ``cache_dir`` if it was fitted on the same examples and encoder, else fit it
        (and save it there). ``cache_dir=None`` always fits."""
        if cache_dir is None:
            return cls.fit(encoder, examples)
        key = hashlib.sha256(
            json.dumps([__version__, encoder.model_id, {r: list(t) for r, t in examples.items()}]).encode()
        ).hexdigest()[:16]
        path = cache_dir / f"support-router-{key}"
        if (path / "manifest.json").exists():
            try:
                return cls(SemanticRouter.load(path, encoder=encoder, default_route="LLM"))
            except (ConfigurationError, OSError, ValueError) as exc:
                logger.warning("cached support router in %s is unusable (%s): fitting again", path, exc)
        layer = cls.fit(encoder, examples)
        try:
            layer.router.save(path)
        except OSError as exc:
            logger.warning("could not cache the support router in %s: %s", path, exc)
        return layer

    def decide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict:
        return self._verdict(self.router.route(text, context=list(context)))

    async def adecide(self, text: str, context: Sequence[str] = ()) -> SemanticVerdict:
        return self._verdict(await self.router.aroute(text, context=list(context)))

    @staticmethod
    def _verdict(decision: SemanticDecision) -> SemanticVerdict:
        scores = {route: round(float(score), 4) for route, score in decision.scores.items()}
        route = _as_route(decision.route) if decision.outcome == "route" else None
        return SemanticVerdict(
            route=route,
            scores=scores,
            best=decision.top,
            runner_up=decision.runner_up,
            margin=round(float(decision.margin), 4),
            why=decision.why,
            outcome=decision.outcome,
        )
