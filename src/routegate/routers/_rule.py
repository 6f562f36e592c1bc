"""The semantic router's decision rule and its fitted parameters.

:class:`Calibration` holds what calibration chose (threshold, clarify margin, the head's mix, the optional
out-of-scope detector) and what it achieved; :func:`apply_rule` turns the head's probabilities into top route,
runner-up and confidence for a batch — the one implementation used both by calibration and at query time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import pydantic

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.errors import ConfigurationError
from routegate.routers import _head
from routegate.routers._head import F32, Head

Score = Literal["p_top+beta*knn", "mahalanobis", "relative_mahalanobis", "energy"]
SCORES: tuple[Score, ...] = ("p_top+beta*knn", "mahalanobis", "relative_mahalanobis", "energy")
"""The confidences calibration may choose without the detector."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """The fitted decision rule and what it achieved on the calibration data."""

    threshold: float
    clarify_margin: float = 0.0
    alpha: float = 1.0
    beta: float = 0.0
    objective: str = "inscope_coverage"
    target: float = 0.97
    source: str = "none"
    examples: int = 0
    in_scope_accuracy: float | None = None
    oos_recall: float | None = None
    coverage: float | None = None
    clarify_rate: float = 0.0
    feasible: bool = True
    grid: tuple[Mapping[str, float | str], ...] = ()
    # the out-of-scope detector (empty = confidence is ``score``): a logistic regression over standardised
    # ``detector_inputs`` (names of ``_head.DETECTOR_INPUTS``; empty = ``_head.DETECTOR_FEATURES``, a router saved
    # before the feature scores); confidence = its in-scope logit
    detector_weights: tuple[float, ...] = ()
    detector_bias: float = 0.0
    detector_mean: tuple[float, ...] = ()
    detector_scale: tuple[float, ...] = ()
    detector_inputs: tuple[str, ...] = ()
    score: Score = "p_top+beta*knn"  # the confidence without the detector

    @property
    def method(self) -> str:
        return "oos-detector" if self.detector_weights else self.score

    @property
    def inputs(self) -> tuple[str, ...]:
        """The detector's inputs, by name."""
        return self.detector_inputs or _head.DETECTOR_FEATURES

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["grid"] = [dict(g) for g in self.grid]
        out["method"] = self.method
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """The calibration in ``data`` (a saved router's manifest: untrusted), every field checked for its type."""
        known = set(cls.__dataclass_fields__)
        try:
            calibration = _CALIBRATION.validate_python({k: v for k, v in data.items() if k in known})
        except pydantic.ValidationError as exc:
            raise ConfigurationError(f"calibration: {exc.error_count()} bad field(s): {_first_error(exc)}") from exc
        lengths = {len(calibration.detector_weights), len(calibration.detector_mean), len(calibration.detector_scale)}
        if len(lengths) != 1 or (
            calibration.detector_weights and len(calibration.detector_weights) != len(calibration.inputs)
        ):
            raise ConfigurationError("calibration: the OOS detector's weights, mean and scale do not match")
        unknown = sorted(set(calibration.detector_inputs) - set(_head.DETECTOR_INPUTS))
        if unknown:
            raise ConfigurationError(f"calibration: unknown OOS detector inputs {unknown[:3]}")
        values = (calibration.threshold, calibration.detector_bias, *calibration.detector_weights)
        if not all(math.isfinite(v) for v in (*values, *calibration.detector_mean, *calibration.detector_scale)):
            raise ConfigurationError("calibration: a threshold or OOS detector parameter is not a finite number")
        return calibration

    def needs_feature_scores(self) -> bool:
        """Whether the confidence reads ``_head.FEATURE_SCORES`` (a standalone score, or the detector's inputs)."""
        used = set(self.inputs) if self.detector_weights else {self.score}
        return bool(used & set(_head.FEATURE_SCORES))


def _first_error(exc: pydantic.ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"


_CALIBRATION = pydantic.TypeAdapter(Calibration)


@dataclass(frozen=True, slots=True)
class Rule:
    """The decision rule's numbers for a batch: fused probabilities, top / runner-up and the confidence."""

    probs: F32
    ranked: F32  # probs with routes outside the allowlist at -1
    top: np.ndarray[Any, np.dtype[np.int64]]
    runner: np.ndarray[Any, np.dtype[np.int64]]  # -1 = none
    p1: F32
    p2: F32
    confidence: F32


def apply_rule(
    head: Head,
    cal: Calibration,
    p_embed: F32,
    p_char: F32 | None,
    vectors: F32,
    mask: np.ndarray[Any, np.dtype[np.bool_]] | None,
    feature_scores: Mapping[str, F32] | None = None,
) -> Rule:
    """``head`` is mixed for ``cal`` (``p_char`` is ignored when ``cal.alpha`` is 1). ``feature_scores``: the
    ``_head.FEATURE_SCORES`` of the rows when already known (out-of-fold calibration), else computed here when
    the confidence needs them."""
    p_char = p_char if cal.alpha < 1.0 else None
    probs = _head.fuse(head, p_embed, p_char, cal.alpha)
    n = len(probs)
    idx = np.arange(n)
    ranked = probs.copy()
    if mask is not None:
        ranked[:, ~mask] = -1.0
    top = ranked.argmax(axis=1).astype(np.int64)
    p1 = np.where(ranked[idx, top] >= 0, probs[idx, top], 0.0).astype(np.float32)
    if probs.shape[1] > 1:
        second = ranked.copy()
        second[idx, top] = -np.inf
        runner = second.argmax(axis=1).astype(np.int64)
        has = second[idx, runner] >= 0
        p2 = np.where(has, probs[idx, runner], 0.0).astype(np.float32)
        runner = np.where(has, runner, -1).astype(np.int64)
    else:
        p2 = np.zeros(n, dtype=np.float32)
        runner = np.full(n, -1, dtype=np.int64)
    if cal.needs_feature_scores() and feature_scores is None:
        feature_scores = feature_scores_of(head, vectors)
    if cal.detector_weights:
        knn_mean, knn_max = _head.knn_stats(head, vectors, top)
        feats = _head.detector_features(
            probs, p_embed, p_char, top, p2, knn_mean, knn_max, dict(feature_scores or {}), cal.inputs
        )
        z = (feats - np.asarray(cal.detector_mean, dtype=np.float32)) / np.asarray(cal.detector_scale, np.float32)
        weights = np.asarray(cal.detector_weights, dtype=np.float32)
        confidence: F32 = (-(z @ weights) - np.float32(cal.detector_bias)).astype(np.float32)
    elif cal.score != "p_top+beta*knn":
        assert feature_scores is not None  # needs_feature_scores() said so
        confidence = feature_scores[cal.score]
    elif cal.beta > 0:
        confidence = p1 + np.float32(cal.beta) * _head.knn_to(head, vectors, top)
    else:
        confidence = p1
    return Rule(probs, ranked, top, runner, p1, p2, confidence.astype(np.float32))


def feature_scores_of(head: Head, vectors: F32) -> dict[str, F32]:
    """``_head.FEATURE_SCORES`` of ``vectors`` under ``head`` (a head saved without the Gaussians: Mahalanobis is
    refused, with what to do)."""
    maha = _head.mahalanobis(head, vectors)
    if maha is None:
        raise ConfigurationError(
            "this router has no class-conditional Gaussians (saved before they existed): fit it again "
            "(routegate fit) to use the mahalanobis score"
        )
    return {"mahalanobis": maha[0], "relative_mahalanobis": maha[1], "energy": _head.energy(head, vectors)}


def score_table(head: Head, cal: Calibration, p_embed: F32, p_char: F32 | None, vectors: F32) -> dict[str, F32]:
    """Every in-scope score the router can compute for a batch (higher = more in scope), by name: ``p_top``,
    ``knn`` (mean similarity to the top route's nearest examples), ``mahalanobis`` and ``relative_mahalanobis`` (not
    for a router saved without the Gaussians), ``energy``, and ``confidence`` — the one the router decides with (``cal.method``)."""
    rule = apply_rule(head, cal, p_embed, p_char, vectors, None)
    table = {"p_top": rule.p1, "knn": _head.knn_to(head, vectors, rule.top)}
    maha = _head.mahalanobis(head, vectors)
    if maha is not None:
        table["mahalanobis"], table["relative_mahalanobis"] = maha
    table["energy"] = _head.energy(head, vectors)
    table["confidence"] = rule.confidence
    return table
