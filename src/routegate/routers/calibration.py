"""Calibration: choosing the out-of-scope threshold and the clarify margin on held-out data.

Pure functions over arrays, so they can be tested on synthetic data with known answers.

* :func:`fit_threshold` — the confidence threshold below which a query goes to the default route, fitted to a
  stated objective: *maximise in-scope accuracy subject to an out-of-scope recall floor* when the held-out data
  has out-of-scope examples, otherwise *keep at least a given share of in-scope queries* (coverage).
* :func:`fit_clarify_margin` — the top-1/top-2 margin below which the router asks the user instead of guessing,
  chosen to maximise (wrong guesses avoided) − ``cost`` × (right guesses turned into a question), under a cap
  on the share of questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from routegate._extras import needs

with needs("embed"):
    import numpy as np
    import numpy.typing as npt

from routegate.errors import ConfigurationError

FloatArray = npt.NDArray[np.floating]
BoolArray = npt.NDArray[np.bool_]
Objective = Literal["oos_recall_floor", "inscope_coverage"]


@dataclass(frozen=True, slots=True)
class ThresholdFit:
    """A fitted threshold and what it achieved on the calibration data."""

    threshold: float
    objective: Objective
    target: float
    in_scope_accuracy: float
    oos_recall: float | None
    coverage: float
    feasible: bool


def _candidates(scores: FloatArray) -> FloatArray:
    uniq = np.unique(scores.astype(np.float64))
    mids = (uniq[:-1] + uniq[1:]) / 2 if len(uniq) > 1 else uniq
    return np.concatenate(([-np.inf], mids, [np.inf]))


def fit_threshold(
    confidence: FloatArray,
    correct: BoolArray,
    is_oos: BoolArray,
    *,
    oos_recall_floor: float = 0.85,
    inscope_coverage: float = 0.97,
) -> ThresholdFit:
    """Fit the threshold ``t``: a query is accepted (routed) when ``confidence >= t``.

    ``correct[i]``: the top route of in-scope query ``i`` is its label (ignored for out-of-scope rows).
    With out-of-scope rows: the ``t`` with the highest in-scope accuracy (accepted and correct / in-scope) among
    those whose OOS recall (rejected OOS / OOS) is >= ``oos_recall_floor``; ties go to the lower ``t``. If no ``t``
    reaches the floor, the one with the highest recall (``feasible=False``). Without: the highest ``t`` that keeps
    >= ``inscope_coverage`` of in-scope queries.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    is_oos = np.asarray(is_oos, dtype=bool)
    if not (confidence.shape == correct.shape == is_oos.shape) or confidence.ndim != 1:
        raise ConfigurationError(
            f"fit_threshold: confidence, correct and is_oos must be 1-D of equal length, got "
            f"{confidence.shape}, {correct.shape}, {is_oos.shape}"
        )
    if not np.isfinite(confidence).all():
        raise ConfigurationError("fit_threshold: confidence holds NaN or infinite values")
    n_in = int((~is_oos).sum())
    n_oos = int(is_oos.sum())
    if n_in == 0:
        raise ConfigurationError("fit_threshold needs at least one in-scope calibration example, got 0")
    cands = _candidates(confidence)
    accepted = confidence[None, :] >= cands[:, None]  # (candidates, n)
    acc = (accepted & correct[None, :] & ~is_oos[None, :]).sum(1) / n_in
    coverage = (accepted & ~is_oos[None, :]).sum(1) / n_in
    if n_oos:
        if not 0.0 <= oos_recall_floor <= 1.0:
            raise ConfigurationError(f"oos_recall_floor must be within [0, 1], got {oos_recall_floor}")
        recall = (~accepted & is_oos[None, :]).sum(1) / n_oos
        ok = recall >= oos_recall_floor - 1e-12
        feasible = bool(ok.any())
        best = int(np.flatnonzero(ok)[np.argmax(acc[ok])]) if feasible else int(np.argmax(recall))
        return ThresholdFit(
            float(cands[best]),
            "oos_recall_floor",
            oos_recall_floor,
            float(acc[best]),
            float(recall[best]),
            float(coverage[best]),
            feasible,
        )
    if not 0.0 < inscope_coverage <= 1.0:
        raise ConfigurationError(f"inscope_coverage must be within (0, 1], got {inscope_coverage}")
    ok = coverage >= inscope_coverage - 1e-12
    best = int(np.flatnonzero(ok)[-1])  # coverage falls as t rises; -inf always qualifies
    return ThresholdFit(
        float(cands[best]), "inscope_coverage", inscope_coverage, float(acc[best]), None, float(coverage[best]), True
    )


@dataclass(frozen=True, slots=True)
class ClarifyFit:
    margin: float
    cost: float
    clarify_rate: float
    errors_avoided: int
    correct_lost: int


def fit_clarify_margin(
    margin: FloatArray, correct: BoolArray, *, cost: float = 0.5, max_rate: float = 0.1
) -> ClarifyFit:
    """Fit the clarify margin ``m`` over accepted in-scope queries: ask when ``margin < m``.

    Gain of ``m`` = wrong answers among the asked − ``cost`` × right answers among the asked; the best ``m`` whose
    share of asked queries is <= ``max_rate`` wins; ``m = 0`` (never ask) when no ``m`` has a positive gain.
    """
    if not cost >= 0.0:
        raise ConfigurationError(f"clarify cost must be >= 0, got {cost}")
    if not 0.0 <= max_rate <= 1.0:
        raise ConfigurationError(f"max clarify rate must be within [0, 1], got {max_rate}")
    margin = np.asarray(margin, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if margin.shape != correct.shape or margin.ndim != 1:
        raise ConfigurationError(f"fit_clarify_margin: shapes differ: {margin.shape} vs {correct.shape}")
    n = len(margin)
    if n == 0:
        return ClarifyFit(0.0, cost, 0.0, 0, 0)
    uniq = np.unique(margin)
    cands = np.concatenate(([0.0], (uniq[:-1] + uniq[1:]) / 2 if len(uniq) > 1 else [], [uniq[-1] + 1e-9]))
    asked = margin[None, :] < cands[:, None]
    wrong = (asked & ~correct[None, :]).sum(1)
    right = (asked & correct[None, :]).sum(1)
    rate = asked.sum(1) / n
    gain = np.where(rate <= max_rate + 1e-12, wrong - cost * right, -np.inf)
    best = int(np.argmax(gain))
    if gain[best] <= 0:
        return ClarifyFit(0.0, cost, 0.0, 0, 0)
    return ClarifyFit(float(cands[best]), cost, float(rate[best]), int(wrong[best]), int(right[best]))
