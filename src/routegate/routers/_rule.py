"""The semantic router's decision rule and its fitted parameters.

:class:`Calibration` holds what calibration chose (threshold, clarify margin, the head's mix, the optional
out-of-scope detector) and what it achieved; :func:`apply_rule` turns the head's probabilities into top route,
runner-up and confidence for a batch — the one implementation used both by calibration and at query time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pydantic

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.errors import ConfigurationError
from routegate.routers import _head
from routegate.routers._head import F32, Head


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
    grid: tuple[Mapping[str, float], ...] = ()
    # the out-of-scope detector (empty = confidence is p(top) + beta * knn): a logistic regression over
    # standardised ``_head.DETECTOR_FEATURES``; confidence = its in-scope logit
    detector_weights: tuple[float, ...] = ()
    detector_bias: float = 0.0
    detector_mean: tuple[float, ...] = ()
    detector_scale: tuple[float, ...] = ()

    @property
    def method(self) -> str:
        return "oos-detector" if self.detector_weights else "p_top+beta*knn"

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
            calibration.detector_weights and len(calibration.detector_weights) != len(_head.DETECTOR_FEATURES)
        ):
            raise ConfigurationError("calibration: the OOS detector's weights, mean and scale do not match")
        return calibration


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
) -> Rule:
    """``head`` is mixed for ``cal`` (``p_char`` is ignored when ``cal.alpha`` is 1)."""
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
    if cal.detector_weights:
        knn_mean, knn_max = _head.knn_stats(head, vectors, top)
        feats = _head.detector_features(probs, p_embed, p_char, top, p2, knn_mean, knn_max)
        z = (feats - np.asarray(cal.detector_mean, dtype=np.float32)) / np.asarray(cal.detector_scale, np.float32)
        weights = np.asarray(cal.detector_weights, dtype=np.float32)
        confidence: F32 = (-(z @ weights) - np.float32(cal.detector_bias)).astype(np.float32)
    elif cal.beta > 0:
        confidence = p1 + np.float32(cal.beta) * _head.knn_to(head, vectors, top)
    else:
        confidence = p1
    return Rule(probs, ranked, top, runner, p1, p2, confidence.astype(np.float32))
