"""Fitting the semantic router: the configuration, out-of-fold predictions and calibration.

Calibration runs the grid of head mixes (``alpha``, ``beta``) through :func:`~routegate.routers.calibration.fit_threshold`
on held-out data, measures the out-of-scope detector out of fold when there are enough out-of-scope examples, and
keeps whatever does best on the stated objective; then fits the clarify margin when asked to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.errors import ConfigurationError
from routegate.routers import _head
from routegate.routers._head import F32, Head
from routegate.routers._rule import SCORES, Calibration, apply_rule, feature_scores_of
from routegate.routers.calibration import fit_clarify_margin, fit_threshold


@dataclass(frozen=True, slots=True)
class FitConfig:
    """How :meth:`SemanticRouter.fit` trains and calibrates.

    ``oos_recall_floor``: with out-of-scope calibration examples, the threshold maximises in-scope accuracy
    subject to this OOS recall. ``inscope_coverage``: without them, the share of in-scope queries that must keep a
    route. ``clarify_cost``: cost of asking relative to a wrong guess (``None`` = never clarify).
    ``char_ngrams``: ``"auto"`` trains the char n-gram model and lets calibration decide whether it is used.
    ``min_examples_per_route``: fewer training examples for any route is refused (degenerate data).
    ``scores``: the confidences calibration may choose between (``"p_top+beta*knn"``, always; ``"mahalanobis"``,
    ``"energy"``); the OOS detector, when measured, reads all of them.
    """

    c_embed: float = 10.0
    c_char: float = 20.0
    char_ngrams: bool | Literal["auto"] = "auto"
    max_char_features: int = 30000
    alphas: tuple[float, ...] = (1.0, 0.7, 0.5)
    betas: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 3.0)
    knn_k: int = 5
    oos_recall_floor: float = 0.85
    inscope_coverage: float = 0.97
    clarify_cost: float | None = None
    max_clarify_rate: float = 0.1
    cv_folds: int = 5
    oos_detector: bool = True
    detector_c: float = 1.0
    detector_min_examples: int = 20
    min_examples_per_route: int = 2
    scores: tuple[str, ...] = SCORES
    seed: int = 0

    def __post_init__(self) -> None:
        if self.c_embed <= 0 or self.c_char <= 0:
            raise ConfigurationError(f"regularisation C must be > 0, got c_embed={self.c_embed}, c_char={self.c_char}")
        if not self.alphas or any(not 0.0 <= a <= 1.0 for a in self.alphas):
            raise ConfigurationError(f"alphas must be a non-empty tuple of values in [0, 1], got {self.alphas}")
        if not self.betas or any(b < 0 for b in self.betas):
            raise ConfigurationError(f"betas must be a non-empty tuple of values >= 0, got {self.betas}")
        if self.knn_k < 1:
            raise ConfigurationError(f"knn_k must be >= 1, got {self.knn_k}")
        if self.cv_folds < 2:
            raise ConfigurationError(f"cv_folds must be >= 2, got {self.cv_folds}")
        if SCORES[0] not in self.scores or set(self.scores) - set(SCORES):
            raise ConfigurationError(f"scores must include {SCORES[0]!r} and name only {SCORES}, got {self.scores}")
        if self.min_examples_per_route < 1:
            raise ConfigurationError(f"min_examples_per_route must be >= 1, got {self.min_examples_per_route}")


def check_training_data(counts: Mapping[str, int], n_oos: int, oos_label: str, config: FitConfig) -> None:
    """Refuse data no router can be calibrated on: fewer than 2 labels (counting out-of-scope examples as one),
    or fewer than ``config.min_examples_per_route`` examples of a route. ``counts``: examples per in-scope route."""
    if not counts:
        raise ConfigurationError(f"fit needs in-scope examples (labels other than {oos_label!r}); got none")
    labels = len(counts) + (1 if n_oos else 0)
    if labels < 2:
        only = next(iter(counts))
        raise ConfigurationError(
            f"fit needs at least 2 labels (2 routes, or 1 route plus out-of-scope examples labelled {oos_label!r}); "
            f"got only {only!r}: with one label there is nothing to tell apart and no threshold to calibrate"
        )
    minimum = config.min_examples_per_route
    few = sorted((c, r) for r, c in counts.items() if c < minimum)
    if few:
        listed = ", ".join(f"{r!r} ({c})" for c, r in few[:10])
        raise ConfigurationError(
            f"fit needs >= {minimum} examples per route; too few for {listed}: add examples or drop the route"
        )


def folds(labels: Sequence[str], k: int, seed: int) -> list[np.ndarray[Any, np.dtype[np.int64]]]:
    """Stratified folds: each route's examples dealt round-robin after a seeded shuffle."""
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    start = 0
    for label in sorted(by_label):
        idx = np.array(by_label[label])
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[(start + j) % k].append(int(i))
        start += len(idx)
    return [np.array(sorted(f), dtype=np.int64) for f in folds if f]


def out_of_fold(
    vectors: F32, texts: Sequence[str], labels: Sequence[str], config: FitConfig, train_kwargs: Mapping[str, Any]
) -> tuple[F32, F32 | None, dict[str, F32]]:
    """Out-of-fold probabilities and feature scores over the training examples (the calibration data when there is
    no ``val``)."""
    routes = sorted(set(labels))
    counts = {r: labels.count(r) for r in routes}
    if len(routes) > 1 and min(counts.values()) < 2:
        lonely = [r for r, c in counts.items() if c < 2]
        raise ConfigurationError(
            f"calibration without validation data needs >= 2 examples per route; too few for {lonely[:5]} "
            "(add examples or pass val=...)"
        )
    k = min(config.cv_folds, max(2, min(counts.values())))
    fold_sets = folds(labels, k, config.seed)
    n = len(texts)
    p_embed = np.zeros((n, len(routes)), dtype=np.float32)
    p_char: F32 | None = None
    scores = {name: np.zeros(n, dtype=np.float32) for name in _head.FEATURE_SCORES}
    index = {r: i for i, r in enumerate(routes)}
    for fold in fold_sets:
        rest = np.setdiff1d(np.arange(n), fold)
        fold_head = _head.train_head(vectors[rest], [texts[i] for i in rest], [labels[i] for i in rest], **train_kwargs)
        cols = np.array([index[r] for r in fold_head.routes], dtype=np.int64)
        fold_texts = [texts[i] for i in fold]
        pe = _head.embed_probs(fold_head, vectors[fold])
        p_embed[np.ix_(fold, cols)] = pe
        pc = _head.char_probs(fold_head, fold_texts)
        if pc is not None:
            if p_char is None:
                p_char = np.zeros((n, len(routes)), dtype=np.float32)
            p_char[np.ix_(fold, cols)] = pc
        for name, values in feature_scores_of(fold_head, vectors[fold]).items():
            scores[name][fold] = values
    return p_embed, p_char, scores


def calibrate(
    head: Head,
    p_embed: F32,
    p_char: F32 | None,
    vectors: F32,
    labels: Sequence[str],
    oos_label: str,
    config: FitConfig,
    source: str,
    feature_scores: Mapping[str, F32] | None = None,
) -> Calibration:
    """Choose the confidence (``p(top) + beta * knn`` over the grid of ``alpha`` x ``beta``, a feature score, or
    the detector over all of them) and its threshold on the calibration data, by the objective. The feature scores
    compete only with out-of-scope rows to measure them on: the coverage objective (no such rows) would pick the
    score that best rejects the head's own errors, not the one that detects queries unlike the training data.
    ``feature_scores``: the rows' ``_head.FEATURE_SCORES`` when already known (out of fold), else computed."""
    index = {r: i for i, r in enumerate(head.routes)}
    is_oos = np.array([label == oos_label for label in labels], dtype=bool)
    y = np.array([index.get(label, -1) for label in labels], dtype=np.int64)
    alphas = config.alphas if p_char is not None else (1.0,)
    extra = dict(feature_scores) if feature_scores is not None else feature_scores_of(head, vectors)
    # ties (common on small data) go to the larger beta: distance to the examples is the signal that generalises
    # to out-of-scope queries unlike any seen in calibration; then to p(top) + beta * knn over the feature scores
    best: tuple[tuple[bool, float, float, float], Calibration] | None = None
    grid: list[dict[str, float | str]] = []
    for alpha in alphas:
        probs = _head.fuse(head, p_embed, p_char, alpha)
        top = probs.argmax(axis=1).astype(np.int64)
        p1 = probs[np.arange(len(probs)), top]
        knn = _head.knn_to(head, vectors, top)
        correct = (top == y) & ~is_oos
        candidates = [(SCORES[0], beta, p1 + beta * knn) for beta in config.betas]
        if is_oos.any():  # without out-of-scope rows the objective (coverage) cannot tell which score detects them
            candidates += [(name, -1.0, extra[name]) for name in SCORES[1:] if name in config.scores]
        for score, beta, confidence in candidates:
            fit = fit_threshold(
                confidence,
                correct,
                is_oos,
                oos_recall_floor=config.oos_recall_floor,
                inscope_coverage=config.inscope_coverage,
            )
            grid.append(
                {
                    "alpha": alpha,
                    "beta": beta,
                    "score": score,
                    "threshold": fit.threshold,
                    "in_scope_accuracy": fit.in_scope_accuracy,
                    "oos_recall": -1.0 if fit.oos_recall is None else fit.oos_recall,
                }
            )
            key = (fit.feasible, round(fit.in_scope_accuracy, 9), round(fit.oos_recall or 0.0, 9), beta)
            if best is None or key > best[0]:
                cal = Calibration(
                    threshold=fit.threshold if np.isfinite(fit.threshold) else (-1e9 if fit.threshold < 0 else 1e9),
                    alpha=alpha,
                    beta=max(beta, 0.0),
                    objective=fit.objective,
                    target=fit.target,
                    source=source,
                    examples=len(labels),
                    in_scope_accuracy=fit.in_scope_accuracy,
                    oos_recall=fit.oos_recall,
                    coverage=fit.coverage,
                    feasible=fit.feasible,
                    score=score,
                )
                best = (key, cal)
    assert best is not None  # alphas and betas are non-empty (FitConfig checks)
    cal = replace(best[1], grid=tuple(grid))
    n_oos, n_in = int(is_oos.sum()), int((~is_oos).sum())
    if config.oos_detector and min(n_oos, n_in) >= config.detector_min_examples and len(head.routes) > 1:
        # two detectors compete: over the head's scores alone, and with the feature scores too (more inputs can
        # fit the calibration rows worse out of fold, as on CLINC150 with the frozen encoder)
        with_features = _head.DETECTOR_FEATURES + tuple(n for n in _head.FEATURE_SCORES if n in config.scores)
        for inputs in dict.fromkeys((_head.DETECTOR_FEATURES, with_features)):
            cal = try_detector(head, cal, p_embed, p_char, vectors, y, is_oos, config, grid, extra, inputs)
    if config.clarify_cost is not None and len(head.routes) > 1:
        rule = apply_rule(head.with_mix(cal.alpha, cal.beta), cal, p_embed, p_char, vectors, None, extra)
        accepted = (rule.confidence >= cal.threshold) & ~is_oos
        margin = (rule.p1 - rule.p2)[accepted]
        clarify = fit_clarify_margin(
            margin, (rule.top == y)[accepted], cost=config.clarify_cost, max_rate=config.max_clarify_rate
        )
        cal = replace(cal, clarify_margin=clarify.margin, clarify_rate=clarify.clarify_rate)
    return cal


def try_detector(
    head: Head,
    cal: Calibration,
    p_embed: F32,
    p_char: F32 | None,
    vectors: F32,
    y: np.ndarray[Any, np.dtype[np.int64]],
    is_oos: np.ndarray[Any, np.dtype[np.bool_]],
    config: FitConfig,
    grid: list[dict[str, float | str]],
    feature_scores: Mapping[str, F32],
    inputs: tuple[str, ...],
) -> Calibration:
    """Fit the out-of-scope detector over ``inputs`` on the calibration data and keep it if its out-of-fold
    threshold does better on the objective than ``cal`` (the best confidence so far)."""
    with needs("embed"):
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

    rule = apply_rule(
        head, replace(cal, beta=0.0, score=SCORES[0], detector_weights=()), p_embed, p_char, vectors, None
    )
    knn_mean, knn_max = _head.knn_stats(head, vectors, rule.top)
    feats = _head.detector_features(
        rule.probs,
        p_embed,
        p_char if cal.alpha < 1.0 else None,
        rule.top,
        rule.p2,
        knn_mean,
        knn_max,
        dict(feature_scores),
        inputs,
    )
    mean = feats.mean(axis=0)
    scale = feats.std(axis=0) + 1e-6
    z = (feats - mean) / scale
    model = LogisticRegression(C=config.detector_c, max_iter=1000)
    splitter = StratifiedKFold(n_splits=5, shuffle=True, random_state=config.seed)
    oof = cross_val_predict(model, z, is_oos, cv=splitter, method="decision_function")
    correct = (rule.top == y) & ~is_oos
    fit = fit_threshold(
        -np.asarray(oof, dtype=np.float64),
        correct,
        is_oos,
        oos_recall_floor=config.oos_recall_floor,
        inscope_coverage=config.inscope_coverage,
    )
    grid.append(
        {
            "alpha": cal.alpha,
            "beta": -1.0,
            "score": "oos-detector" if inputs == _head.DETECTOR_FEATURES else "oos-detector+features",
            "threshold": fit.threshold,
            "in_scope_accuracy": fit.in_scope_accuracy,
            "oos_recall": -1.0 if fit.oos_recall is None else fit.oos_recall,
        }
    )
    base = (cal.feasible, round(cal.in_scope_accuracy or 0.0, 9), round(cal.oos_recall or 0.0, 9))
    mine = (fit.feasible, round(fit.in_scope_accuracy, 9), round(fit.oos_recall or 0.0, 9))
    if mine <= base or not np.isfinite(fit.threshold):
        return replace(cal, grid=tuple(grid))
    model.fit(z, is_oos)
    return replace(
        cal,
        threshold=fit.threshold,
        beta=0.0,
        score=SCORES[0],
        in_scope_accuracy=fit.in_scope_accuracy,
        oos_recall=fit.oos_recall,
        coverage=fit.coverage,
        feasible=fit.feasible,
        grid=tuple(grid),
        detector_weights=tuple(float(w) for w in np.asarray(model.coef_)[0]),
        detector_bias=float(np.asarray(model.intercept_)[0]),
        detector_mean=tuple(float(v) for v in mean),
        detector_scale=tuple(float(v) for v in scale),
        detector_inputs=inputs,
    )
