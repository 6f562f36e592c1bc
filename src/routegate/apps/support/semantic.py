"""The embedding layer of the support router: nearest route by example utterances.

Each route has example utterances, from the desk's configuration (the built-in desk's, written for this layer: none
is copied from the labelled evaluation set in ``tests/data/support_routes.jsonl``). They are embedded once when the layer is built. A message's score for a
route is the mean cosine similarity of its ``k`` nearest examples of that route; the layer decides when the best
score reaches ``min_score`` and leads the runner-up by ``min_margin``, and otherwise abstains (the router then
asks the LLM router when one is configured, or answers on the LLM route: "no route matches confidently").

Two implementations of :class:`EmbeddingLayer`:

* :class:`FittedSemanticLayer` — the default of the CLI and the server: ``routegate.routers.semantic.SemanticRouter``
  fitted on the same examples (learned head, calibrated out-of-scope threshold and clarify margin, multi-turn:
  an unsure message is retried with the previous user message). Fitting takes seconds, so the fitted router is
  cached on disk, keyed by the examples, the encoder and the routegate version.
* :class:`ExampleEmbeddingLayer` — nearest examples with a fixed floor and margin: no fitting, built in well under
  a second; the tests' default. A configured desk keeps its examples' vectors between processes
  (:mod:`routegate.apps.support.vector_cache`), so its next start embeds none.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from routegate._extras import needs

with needs("desk"):
    import numpy as np

from routegate import __version__
from routegate.apps.configured.routes import builtin_config, route_examples
from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.apps.support.vector_cache import VectorCache
from routegate.core import RouteDecision, RouteRequest
from routegate.embed import Encoder
from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError
from routegate.routers._stepped import Routing, RoutingQuery, SteppedRouter
from routegate.routers.cascade import SemanticStage
from routegate.routers.rules import ArgsBuilder
from routegate.routers.semantic import Outcome as SemanticOutcome
from routegate.routers.semantic import SemanticDecision, SemanticRouter, route_decision_of

logger = logging.getLogger(__name__)


def builtin_examples() -> Mapping[SupportRoute, tuple[str, ...]]:
    """The built-in desk's example utterances per route, as its configuration has them (the layers' default)."""
    return route_examples(builtin_config())


DEFAULT_ROUTE: Final[SupportRoute] = "LLM"
"""Where an unsure message goes: the LLM route answers it, or asks back when two routes are close."""


def query_args(request: RouteRequest) -> Mapping[str, Any]:
    """Every support route's arguments: the user's message as ``query``."""
    return {"query": request.goal}


class EmbeddingLayer(SemanticStage, Protocol):
    """What the support router needs from an embedding layer: a semantic stage of the cascade
    (:class:`routegate.routers.cascade.SemanticStage`) whose unsure outcomes go to the LLM route. The two layers here
    also route a message directly (``route`` / ``aroute``; ``context``: earlier user messages, oldest first)."""

    name: str


class _SupportLayer(SteppedRouter[SemanticDecision]):
    """What both embedding layers share: their name, the ``query`` argument and where unsure messages go.

    ``unsure_margin``: the router's "I don't know" gate sends a route this layer chose to the clarifying answer when
    its margin over the runner-up is under this (each layer's own scale; tuned on the labelled sets' validation
    splits with ``bench/support_unsure.py --tune``)."""

    name = "semantic"
    unsure_margin: float = 0.0
    args_builder: ArgsBuilder = staticmethod(query_args)

    def to_route_decision(
        self, decision: SemanticDecision, request: RouteRequest, *, allowed: Collection[str], decided_by: str = ""
    ) -> RouteDecision:
        return support_route_decision(decision, request, allowed=allowed, decided_by=decided_by or self.name)


class ExampleEmbeddingLayer(_SupportLayer):
    """Mean of the ``k`` nearest example similarities per route, with a score floor and a margin."""

    unsure_margin = 0.08  # cosine similarities: the smallest margin with the best validation accuracy

    def __init__(
        self,
        encoder: Encoder,
        *,
        examples: Mapping[SupportRoute, Sequence[str]] | None = None,
        k: int = 2,
        min_score: float = 0.45,
        min_margin: float = 0.04,
        cache: VectorCache | None = None,
    ) -> None:
        """``cache``: where the examples' vectors are kept between processes (embedded again only when the examples
        or the encoder changed); ``None`` embeds them here."""
        if k < 1:
            raise ConfigurationError(f"k must be >= 1, got {k}")
        examples = builtin_examples() if examples is None else examples
        missing = [r for r in ROUTES if not examples.get(r)]
        if missing:
            raise ConfigurationError(f"every route needs example utterances; none for {missing}")
        self.encoder = encoder
        self.k = k
        self.min_score = min_score
        self.min_margin = min_margin
        self._routes = list(ROUTES)
        texts = [t for r in self._routes for t in examples[r]]
        self._labels = np.array([i for i, r in enumerate(self._routes) for _ in examples[r]])
        self._matrix: Vectors = encoder.encode(texts) if cache is None else cache.vectors(encoder, texts)

    def scores(self, text: str) -> dict[str, float]:
        return self._scores_of(self.encoder.encode([text])[0])

    def _scores_of(self, vector: Vectors, allowed: Collection[str] | None = None) -> dict[str, float]:
        sims = self._matrix @ vector
        out: dict[str, float] = {}
        for index, route in enumerate(self._routes):
            if allowed is None or route in allowed:
                own = np.sort(sims[self._labels == index])[::-1][: self.k]
                out[route] = round(float(own.mean()), 4)
        return out

    def routing(self, query: RoutingQuery) -> Routing[SemanticDecision]:
        """One embedding of the query's text; its context and previous route are not used by this layer."""
        allowed = query.allowed
        (vector,) = yield [query.text]
        scores = self._scores_of(vector, allowed)
        ranked = sorted(scores, key=scores.__getitem__, reverse=True)
        if not ranked:
            return _decision(DEFAULT_ROUTE, "default", DEFAULT_ROUTE, scores, None, self, "no allowed route")
        best = ranked[0]
        runner_up = ranked[1] if len(ranked) > 1 else None
        if scores[best] < self.min_score:
            return _decision(DEFAULT_ROUTE, "default", best, scores, runner_up, self)
        if runner_up is not None and scores[best] - scores[runner_up] < self.min_margin:
            return _decision(best, "clarify", best, scores, runner_up, self)
        return _decision(best, "route", best, scores, runner_up, self)


def _decision(
    route: str,
    outcome: SemanticOutcome,
    top: str,
    scores: Mapping[str, float],
    runner_up: str | None,
    layer: ExampleEmbeddingLayer,
    why: str = "",
) -> SemanticDecision:
    best = scores.get(top, 0.0)
    second = scores[runner_up] if runner_up is not None else 0.0
    return SemanticDecision(
        route=route,
        outcome=outcome,
        top=top,
        score=best,
        confidence=best,
        margin=round(best - second, 4),
        runner_up=runner_up,
        runner_up_score=second,
        threshold=layer.min_score,
        clarify_margin=layer.min_margin,
        scores=dict(scores),
    )


def support_route_decision(
    decision: SemanticDecision, request: RouteRequest, *, allowed: Collection[str], decided_by: str
) -> RouteDecision:
    """A support embedding layer's decision as a route decision: unsure outcomes go to the LLM route."""
    return route_decision_of(
        decision, request, allowed=allowed, clarify_target=DEFAULT_ROUTE, args=query_args, decided_by=decided_by
    )


class FittedSemanticLayer(_SupportLayer):
    """``routegate.routers.semantic.SemanticRouter`` over the route examples, as the router's embedding layer."""

    unsure_margin = 0.14  # probabilities: the first validation gain (0.34, the best, cost a held-out name)

    def __init__(self, router: SemanticRouter, *, routes: Collection[str] = ROUTES) -> None:
        """``routes``: the routes the router must know (a configured desk's are the kinds it has)."""
        missing = set(routes) - set(router.routes)
        if missing:
            raise ConfigurationError(f"the semantic router has no route(s) {sorted(missing)}")
        if router.default_route != DEFAULT_ROUTE:
            raise ConfigurationError(
                f"the support desk's semantic router must send out-of-scope messages to {DEFAULT_ROUTE!r}, "
                f"not {router.default_route!r}"
            )
        self.router = router
        self.encoder = router.encoder

    @classmethod
    def fit(
        cls,
        encoder: Encoder,
        examples: Mapping[SupportRoute, Sequence[str]] | None = None,
        *,
        routes: Collection[str] = ROUTES,
    ) -> FittedSemanticLayer:
        """``routes``: the routes the layer must know (:meth:`__init__`); ``examples`` has one entry per route (the
        built-in desk's when ``None``)."""
        examples = builtin_examples() if examples is None else examples
        by_route: dict[str, list[str]] = {str(route): list(texts) for route, texts in examples.items()}
        return cls(SemanticRouter.from_routes(by_route, encoder=encoder, default_route=DEFAULT_ROUTE), routes=routes)

    @classmethod
    def load_or_fit(
        cls,
        encoder: Encoder,
        cache_dir: Path | None,
        examples: Mapping[SupportRoute, Sequence[str]] | None = None,
        *,
        routes: Collection[str] = ROUTES,
    ) -> FittedSemanticLayer:
        """The fitted router from ``cache_dir`` if it was fitted on the same examples and encoder, else fit it
        (and save it there). ``cache_dir=None`` always fits. A configured desk with ``[router] fit_at_start`` comes
        here too, with its own examples (the key is of the examples, so each set of examples has its entry)."""
        examples = builtin_examples() if examples is None else examples
        if cache_dir is None:
            return cls.fit(encoder, examples, routes=routes)
        key = hashlib.sha256(
            json.dumps([__version__, encoder.model_id, {r: list(t) for r, t in examples.items()}]).encode()
        ).hexdigest()[:16]
        path = cache_dir / f"support-router-{key}"
        if (path / "manifest.json").exists():
            try:
                return cls(SemanticRouter.load(path, encoder=encoder, default_route=DEFAULT_ROUTE), routes=routes)
            except (ConfigurationError, OSError, ValueError) as exc:
                logger.warning("cached support router in %s is unusable (%s): fitting again", path, exc)
        layer = cls.fit(encoder, examples, routes=routes)
        try:
            layer.router.save(path)
        except OSError as exc:
            logger.warning("could not cache the support router in %s: %s", path, exc)
        return layer

    def routing(self, query: RoutingQuery) -> Routing[SemanticDecision]:
        return self.router.routing(query)
