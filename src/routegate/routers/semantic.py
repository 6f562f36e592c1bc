"""The semantic router: routes from example utterances, a learned head, calibrated out-of-scope and clarify.

Build one from example utterances (:meth:`SemanticRouter.from_routes`) or fit it on labelled data
(:meth:`SemanticRouter.fit`, label ``oos`` = no route). Each query gets three numbers from the head
(:mod:`routegate.routers._head`): the fused route probabilities, the confidence ``p(top) + beta * knn`` and the
margin ``p(top) - p(runner-up)``. Outcomes:

* ``default`` — confidence below the calibrated threshold: no route fits, the default route takes it;
* ``clarify`` — confident it is in scope but the two best routes are closer than the calibrated margin;
* ``route`` — the top route.

Calibration happens on held-out data (``val``) when given, otherwise on out-of-fold predictions over the training
examples. The head's mix (``alpha``: embedding vs. char n-gram model, ``beta``: weight of the neighbour
similarity) is chosen on the same data by the same objective — by measurement. With enough out-of-scope
calibration examples, a small logistic-regression OOS detector over the head's scores is measured too (out of
fold) and replaces ``p(top) + beta * knn`` as the confidence when it does better.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.core.stop_reasons import safe_detail
from routegate.embed.protocol import Encoder
from routegate.errors import ConfigurationError, RunStopError
from routegate.routers import _head
from routegate.routers._fit import FitConfig, calibrate, check_training_data, out_of_fold
from routegate.routers._head import F32, Head
from routegate.routers._rule import Calibration, apply_rule, feature_scores_of, score_table
from routegate.routers._stepped import Routing, RoutingQuery, SteppedRouter
from routegate.routers.data import OOS_LABEL, LabelledExample
from routegate.routers.rules import ArgsBuilder, ticket_args

logger = logging.getLogger(__name__)

Outcome = Literal["route", "clarify", "default"]
CLARIFY = "clarify"
NO_ROUTE_OUT_OF_SCOPE = "no_route:out_of_scope"


@dataclass(frozen=True, slots=True)
class SemanticDecision:
    """A typed routing decision: what was chosen, how sure, and the runner-up ("why this route?")."""

    route: str
    outcome: Outcome
    top: str
    score: float
    confidence: float
    margin: float
    runner_up: str | None
    runner_up_score: float
    threshold: float
    clarify_margin: float
    scores: Mapping[str, float] = field(default_factory=dict)
    used_context: bool = False

    @property
    def why(self) -> str:
        runner = f"{self.runner_up} {self.runner_up_score:.3f}" if self.runner_up else "none"
        head = {
            "route": f"{self.top} p={self.score:.3f}",
            "clarify": f"ask: {self.top} or {self.runner_up}? margin {self.margin:.3f} < {self.clarify_margin:.3f}",
            "default": f"out of scope -> {self.route} (best {self.top} p={self.score:.3f})",
        }[self.outcome]
        ctx = "; with the previous turn" if self.used_context else ""
        return (
            f"{head}; confidence {self.confidence:.3f} vs threshold {self.threshold:.3f}; "
            f"margin {self.margin:.3f}; runner-up {runner}{ctx}"
        )

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["scores"] = dict(self.scores)
        out["why"] = self.why
        return out


def _texts_of(context: Sequence[object]) -> list[str]:
    """User texts from a conversation: plain strings or ``{"role": ..., "content": ...}`` messages."""
    out: list[str] = []
    for item in context:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping):
            role, content = item.get("role", "user"), item.get("content")
            if role == "user" and isinstance(content, str):
                out.append(content)
    return out


def _with_previous_turn(query: str, context: Sequence[object]) -> str | None:
    """The query prefixed with the previous user turn (``None`` when there is none)."""
    history = _texts_of(context)
    if history and history[-1] == query:
        history = history[:-1]
    return f"{history[-1]} {query}" if history else None


def _settle(
    decision: SemanticDecision, with_context: SemanticDecision | None, previous_route: str | None
) -> SemanticDecision:
    """The multi-turn rule: the query alone if it routes; else with the previous turn if that routes; else a
    clarify that involves the previous route stays on it; else the query's own (unsure) decision."""
    if decision.outcome == "route":
        return decision
    if with_context is not None and with_context.outcome == "route":
        return replace(with_context, used_context=True)
    if (
        decision.outcome == "clarify"
        and previous_route is not None
        and previous_route in (decision.top, decision.runner_up)
    ):
        return replace(decision, route=previous_route, outcome="route", used_context=True)
    return decision


class SemanticRouter(SteppedRouter[SemanticDecision]):
    """Embedding router with a learned head and calibrated out-of-scope / clarify thresholds.

    Implements :class:`routegate.core.protocols.Router` (``decide``) and offers :meth:`route` / :meth:`aroute` for
    direct use (one :meth:`routing` computation, embedded on the caller's thread or off the event loop).
    ``default_route``: where out-of-scope queries go. ``clarify_target``: a catalogue route that asks the user
    (when ``None``, :meth:`decide` ends the run with the stop reason ``clarify:<a>,<b>``).
    """

    def __init__(
        self,
        head: Head,
        calibration: Calibration,
        *,
        encoder: Encoder,
        default_route: str,
        clarify_target: str | None = None,
        args: ArgsBuilder = ticket_args,
        name: str = "semantic",
    ) -> None:
        if encoder.dim != head.coef.shape[1]:
            raise ConfigurationError(
                f"encoder {encoder.model_id!r} gives {encoder.dim}-dim vectors; the router expects {head.coef.shape[1]}"
            )
        if not default_route:
            raise ConfigurationError("SemanticRouter needs a default route name for out-of-scope queries")
        self._trained = head  # every part, whatever the calibration chose (recalibrate may choose again)
        self.head = head.with_mix(calibration.alpha, calibration.beta)
        self.calibration = calibration
        self.encoder = encoder
        self.default_route = default_route
        self.clarify_target = clarify_target
        self.name = name
        self.args_builder = args
        self._index = {r: i for i, r in enumerate(head.routes)}

    def __repr__(self) -> str:
        return (
            f"SemanticRouter(routes={len(self.routes)}, default_route={self.default_route!r}, "
            f"threshold={self.calibration.threshold:.3f}, clarify_margin={self.calibration.clarify_margin:.3f})"
        )

    @property
    def routes(self) -> tuple[str, ...]:
        return self.head.routes

    # ------------------------------------------------------------------ building

    @classmethod
    def from_routes(
        cls,
        routes: Mapping[str, Sequence[str]],
        *,
        encoder: Encoder,
        default_route: str,
        out_of_scope: Sequence[str] = (),
        val: Sequence[LabelledExample] | None = None,
        config: FitConfig | None = None,
        **kwargs: Any,
    ) -> SemanticRouter:
        """A router from example utterances per route (``{"VECTOR": ["how do I reset my password", ...]}``).

        ``out_of_scope``: queries no route should take; they only calibrate the threshold (OOS-recall objective).
        """
        if OOS_LABEL in routes:
            raise ConfigurationError(f"{OOS_LABEL!r} is reserved for out-of-scope examples: pass them as out_of_scope")
        train = [LabelledExample(text, route) for route, texts in routes.items() for text in texts]
        train += [LabelledExample(text, OOS_LABEL) for text in out_of_scope]
        return cls.fit(train, val=val, encoder=encoder, default_route=default_route, config=config, **kwargs)

    @classmethod
    def fit(
        cls,
        train: Sequence[LabelledExample],
        *,
        encoder: Encoder,
        val: Sequence[LabelledExample] | None = None,
        default_route: str = OOS_LABEL,
        oos_label: str = OOS_LABEL,
        config: FitConfig | None = None,
        **kwargs: Any,
    ) -> SemanticRouter:
        """Fit the head on ``train`` (rows labelled ``oos_label`` are used for calibration only) and calibrate on
        ``val`` (or on out-of-fold predictions over ``train`` when ``val`` is ``None``).

        Degenerate data is refused with :class:`~routegate.errors.ConfigurationError`: fewer than 2 labels (2
        routes, or 1 route plus out-of-scope examples in ``train`` or ``val``), or a route with fewer than
        ``config.min_examples_per_route`` (2) examples."""
        config = config or FitConfig()
        started = time.perf_counter()
        in_scope = [e for e in train if e.label != oos_label]
        oos_train = [e for e in train if e.label == oos_label]
        routes = sorted({e.label for e in in_scope})
        counts = {r: sum(e.label == r for e in in_scope) for r in routes}
        check_training_data(counts, len(oos_train) + sum(e.label == oos_label for e in val or ()), oos_label, config)
        texts = [e.text for e in in_scope]
        vectors = encoder.encode(texts)
        use_char = config.char_ngrams is True or (config.char_ngrams == "auto" and len(routes) > 1)
        train_kwargs = {
            "c_embed": config.c_embed,
            "c_char": config.c_char,
            "char_ngrams": use_char,
            "knn_k": config.knn_k,
            "max_char_features": config.max_char_features,
            "seed": config.seed,
        }
        head = _head.train_head(vectors, texts, [e.label for e in in_scope], **train_kwargs)  # type: ignore[arg-type]
        if val is not None:
            val_in = [e for e in val if e.label != oos_label and e.label in counts]
            # out-of-scope rows of train never reach the head: they calibrate along with val's
            val_oos = [e for e in val if e.label == oos_label] + oos_train
            unknown = {e.label for e in val if e.label != oos_label and e.label not in counts}
            if unknown:
                raise ConfigurationError(f"validation labels not in the training data: {sorted(unknown)[:5]}")
            cal_texts = [e.text for e in val_in + val_oos]
            cal_labels = [e.label for e in val_in] + [oos_label] * len(val_oos)
            cal_vectors = encoder.encode(cal_texts)
            p_embed = _head.embed_probs(head, cal_vectors)
            p_char = _head.char_probs(head, cal_texts)
            scores = feature_scores_of(head, cal_vectors)
            source = "val"
        else:
            cal_vectors, cal_labels = vectors, [e.label for e in in_scope]
            p_embed, p_char, scores = out_of_fold(vectors, texts, cal_labels, config, train_kwargs)
            if oos_train:
                oos_texts = [e.text for e in oos_train]
                oos_vectors = encoder.encode(oos_texts)
                p_embed = np.vstack([p_embed, _head.embed_probs(head, oos_vectors)])
                extra_char = _head.char_probs(head, oos_texts)
                if p_char is not None and extra_char is not None:
                    p_char = np.vstack([p_char, extra_char])
                oos_scores = feature_scores_of(head, oos_vectors)
                scores = {name: np.concatenate([scores[name], oos_scores[name]]) for name in scores}
                cal_vectors = np.vstack([cal_vectors, oos_vectors])
                cal_labels = cal_labels + [oos_label] * len(oos_train)
            source = f"{config.cv_folds}-fold cross-validation on train"
        calibration = calibrate(head, p_embed, p_char, cal_vectors, cal_labels, oos_label, config, source, scores)
        router = cls(head, calibration, encoder=encoder, default_route=default_route, **kwargs)
        logger.info(
            "semantic router fitted: %d routes, %d examples, alpha=%.2f beta=%.2f threshold=%.3f in %.1fs",
            len(routes),
            len(in_scope),
            calibration.alpha,
            calibration.beta,
            calibration.threshold,
            time.perf_counter() - started,
        )
        return router

    def recalibrate(
        self,
        val: Sequence[LabelledExample],
        *,
        config: FitConfig | None = None,
        oos_label: str = OOS_LABEL,
    ) -> SemanticRouter:
        """A copy with the same head calibrated again on ``val`` (e.g. another objective, or new held-out data)."""
        config = config or FitConfig()
        unknown = {e.label for e in val if e.label != oos_label and e.label not in self._index}
        if unknown:
            raise ConfigurationError(f"validation labels not in the router's routes: {sorted(unknown)[:5]}")
        if not any(e.label != oos_label for e in val):
            raise ConfigurationError("recalibrate needs in-scope validation examples, got none")
        texts = [e.text for e in val]
        vectors = self.encoder.encode(texts)
        head = self._trained
        calibration = calibrate(
            head,
            _head.embed_probs(head, vectors),
            _head.char_probs(head, texts),
            vectors,
            [e.label for e in val],
            oos_label,
            config,
            "val",
        )
        return self._copy(calibration, self.encoder)

    def with_encoder(self, encoder: Encoder) -> SemanticRouter:
        """A copy that embeds with ``encoder`` and is otherwise this router (routes, head, calibration): for the
        same encoder behind a cache or a batching wrapper. ``encoder`` must give vectors of the router's dimension
        (:class:`~routegate.errors.ConfigurationError` otherwise); it should be the encoder the router was fitted
        with, as nothing else gives the vectors its head expects."""
        return self._copy(self.calibration, encoder)

    def _copy(self, calibration: Calibration, encoder: Encoder) -> SemanticRouter:
        return SemanticRouter(
            self._trained,
            calibration,
            encoder=encoder,
            default_route=self.default_route,
            clarify_target=self.clarify_target,
            args=self.args_builder,
            name=self.name,
        )

    # ------------------------------------------------------------------ deciding

    def _mask(self, allowed: Collection[str] | None) -> np.ndarray[Any, np.dtype[np.bool_]] | None:
        if allowed is None:
            return None
        return np.array([r in allowed for r in self.head.routes], dtype=bool)

    def _decide(self, vectors: F32, texts: Sequence[str], allowed: Collection[str] | None) -> list[SemanticDecision]:
        head = self.head
        mask = self._mask(allowed)
        p_char = _head.char_probs(head, texts) if head.alpha < 1.0 else None
        rule = apply_rule(head, self.calibration, _head.embed_probs(head, vectors), p_char, vectors, mask)
        cal = self.calibration
        out: list[SemanticDecision] = []
        n_routes = len(head.routes)
        allowed_any = mask is None or bool(mask.any())
        for i in range(len(texts)):
            row = rule.ranked[i]
            t = int(rule.top[i])
            runner = head.routes[int(rule.runner[i])] if rule.runner[i] >= 0 else None
            confidence = float(rule.confidence[i])
            margin = float(rule.p1[i] - rule.p2[i])
            if not allowed_any or confidence < cal.threshold:
                outcome: Outcome = "default"
                route = self.default_route
            elif runner is not None and margin < cal.clarify_margin:
                outcome, route = "clarify", head.routes[t]
            else:
                outcome, route = "route", head.routes[t]
            best = np.argsort(-row)[: min(5, n_routes)]
            scores = {head.routes[int(j)]: round(float(rule.probs[i, j]), 6) for j in best if row[j] >= 0}
            out.append(
                SemanticDecision(
                    route=route,
                    outcome=outcome,
                    top=head.routes[t],
                    score=float(rule.p1[i]),
                    confidence=confidence,
                    margin=margin,
                    runner_up=runner,
                    runner_up_score=float(rule.p2[i]),
                    threshold=cal.threshold,
                    clarify_margin=cal.clarify_margin,
                    scores=scores,
                )
            )
        return out

    def score_table(self, texts: Sequence[str]) -> dict[str, F32]:
        """Every in-scope score of each text (one encoder pass; higher = more in scope), by name: ``p_top``,
        ``knn``, ``mahalanobis``, ``energy`` and ``confidence``, the one this router decides with
        (``calibration.method``). What ``routegate eval`` measures each score's OOS AUROC with."""
        texts = [str(t) for t in texts]
        vectors = self.encoder.encode(texts)
        head = self.head
        p_char = _head.char_probs(head, texts) if head.alpha < 1.0 else None
        return score_table(head, self.calibration, _head.embed_probs(head, vectors), p_char, vectors)

    def route_many(self, texts: Sequence[str], *, allowed: Collection[str] | None = None) -> list[SemanticDecision]:
        """Route a batch of single-turn queries (one encoder pass)."""
        texts = [str(t) for t in texts]
        if not texts:
            return []
        return self._decide(self.encoder.encode(texts), texts, allowed)

    def routing(self, query: RoutingQuery) -> Routing[SemanticDecision]:
        """The routing of one query as steps (:meth:`route` / :meth:`aroute` drive it). A query that is unsure on
        its own ("and ticket 2?") is tried again together with the previous user turn; failing that, a clarify
        between ``previous_route`` and another route stays on ``previous_route``."""
        text, allowed = query.text, query.allowed
        decision = self._decide((yield [text]), [text], allowed)[0]
        joined = _with_previous_turn(text, query.context) if decision.outcome != "route" else None
        with_context = None
        if joined is not None:  # only an unsure query pays for the second encoding
            with_context = self._decide((yield [joined]), [joined], allowed)[0]
        return _settle(decision, with_context, query.previous_route)

    async def decide(self, request: RouteRequest) -> RouteDecision:
        """The :class:`~routegate.core.protocols.Router` protocol: route ``request.goal`` among the allowed routes.

        Reads the typed ``request.conversation`` (earlier turns) and ``request.previous_route``.
        """
        allowed = {spec.name for spec in request.catalog} - request.forbidden_targets
        conversation, previous = conversation_of(request)
        decision = await self.aroute(request.goal, context=conversation, previous_route=previous, allowed=allowed)
        return self.to_route_decision(decision, request, allowed=allowed)

    def to_route_decision(
        self, decision: SemanticDecision, request: RouteRequest, *, allowed: Collection[str], decided_by: str = ""
    ) -> RouteDecision:
        """Turn a typed decision into the untrusted route intent the policy boundary checks."""
        return route_decision_of(
            decision,
            request,
            allowed=allowed,
            clarify_target=self.clarify_target,
            args=self.args_builder,
            decided_by=decided_by or self.name,
        )

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | Path) -> Path:
        """Save to a directory (JSON manifest + ``.npy`` arrays; no pickle)."""
        from routegate.routers.persist import save_router

        return save_router(self, Path(path))

    @classmethod
    def load(cls, path: str | Path, *, encoder: Encoder | None = None, **kwargs: Any) -> SemanticRouter:
        """Load a saved router; ``encoder`` defaults to the embedded MiniLM encoder (checked against the manifest)."""
        from routegate.routers.persist import load_router

        return load_router(Path(path), SemanticRouter, encoder=encoder, **kwargs)


def route_decision_of(
    decision: SemanticDecision,
    request: RouteRequest,
    *,
    allowed: Collection[str],
    clarify_target: str | None,
    args: ArgsBuilder,
    decided_by: str,
) -> RouteDecision:
    """A typed semantic decision as the untrusted route intent the policy boundary checks: ``route`` goes to its
    route, ``clarify`` to ``clarify_target`` (a run stop ``clarify:<a>,<b>`` without one), ``default`` to the
    decision's default route (a run stop ``no_route:out_of_scope`` when that is not allowed)."""
    target = decision.route
    if decision.outcome == "clarify":
        if clarify_target is None or clarify_target not in allowed:
            raise RunStopError(
                f"{CLARIFY}:{safe_detail(decision.top)},{safe_detail(decision.runner_up or '')}",
                f"ambiguous between {decision.top} and {decision.runner_up}: {decision.why}",
            )
        target = clarify_target
    elif decision.outcome == "default" and target not in allowed:
        raise RunStopError(
            NO_ROUTE_OUT_OF_SCOPE,
            f"no route fits and the default route {target!r} is not allowed: {decision.why}",
        )
    return RouteDecision.proposed(
        target,
        dict(args(request)),
        decided_by=decided_by,
        scores=dict(decision.scores),
        why=f"{decision.outcome}: {decision.why}",
    )


def conversation_of(request: RouteRequest) -> tuple[Sequence[object], str | None]:
    """The request's conversation and previous route, as far as they are what they claim to be (a request may
    come from anywhere: odd values are ignored, never trusted)."""
    conversation: object = request.conversation
    previous: object = request.previous_route
    if not isinstance(conversation, Sequence) or isinstance(conversation, str | bytes):
        conversation = ()
    return conversation, previous if isinstance(previous, str) else None
