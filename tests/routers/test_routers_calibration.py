"""Calibration on synthetic data with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.errors import ConfigurationError
from routegate.routers.calibration import fit_clarify_margin, fit_threshold


def test_separable_scores_give_perfect_threshold() -> None:
    conf = np.array([0.9, 0.8, 0.7, 0.2, 0.1])
    correct = np.array([True, True, True, False, False])
    is_oos = np.array([False, False, False, True, True])
    fit = fit_threshold(conf, correct, is_oos, oos_recall_floor=1.0)
    assert 0.2 < fit.threshold <= 0.7
    assert fit.in_scope_accuracy == 1.0
    assert fit.oos_recall == 1.0
    assert fit.feasible


def test_recall_floor_trades_accuracy_known_answer() -> None:
    # in-scope at 0.3 (correct) and 0.6, 0.9; oos at 0.4 and 0.1
    conf = np.array([0.3, 0.6, 0.9, 0.4, 0.1])
    correct = np.array([True, True, True, False, False])
    is_oos = np.array([False, False, False, True, True])
    loose = fit_threshold(conf, correct, is_oos, oos_recall_floor=0.5)
    assert loose.in_scope_accuracy == 1.0  # t in (0.1, 0.3]: keeps every in-scope query, rejects one oos
    assert loose.oos_recall == 0.5
    strict = fit_threshold(conf, correct, is_oos, oos_recall_floor=1.0)
    assert strict.oos_recall == 1.0
    assert strict.in_scope_accuracy == pytest.approx(2 / 3)  # must drop the in-scope query at 0.3
    assert 0.4 < strict.threshold <= 0.6


def test_wrong_top_route_never_counts_as_accurate() -> None:
    conf = np.array([0.9, 0.9, 0.1])
    correct = np.array([True, False, False])
    is_oos = np.array([False, False, True])
    fit = fit_threshold(conf, correct, is_oos, oos_recall_floor=1.0)
    assert fit.in_scope_accuracy == 0.5


def test_infeasible_floor_maximises_recall() -> None:
    conf = np.array([0.5, 0.5])
    fit = fit_threshold(conf, np.array([True, False]), np.array([False, True]), oos_recall_floor=1.0)
    assert fit.feasible  # rejecting everything reaches recall 1
    assert fit.oos_recall == 1.0
    assert fit.in_scope_accuracy == 0.0


def test_coverage_objective_without_oos() -> None:
    conf = np.linspace(0.01, 1.0, 100)
    fit = fit_threshold(conf, np.ones(100, bool), np.zeros(100, bool), inscope_coverage=0.9)
    assert fit.objective == "inscope_coverage"
    assert fit.coverage == pytest.approx(0.9)
    assert fit.oos_recall is None


@pytest.mark.parametrize(
    ("conf", "correct", "oos"),
    [
        (np.array([0.1, 0.2]), np.array([True]), np.array([False, False])),
        (np.array([np.nan]), np.array([True]), np.array([False])),
        (np.array([0.5]), np.array([False]), np.array([True])),
    ],
)
def test_bad_inputs_are_refused(conf: np.ndarray, correct: np.ndarray, oos: np.ndarray) -> None:
    with pytest.raises(ConfigurationError):
        fit_threshold(conf, correct, oos)


def test_clarify_margin_known_answer() -> None:
    # small margins are mostly wrong, large ones right
    margin = np.array([0.01, 0.02, 0.03, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
    correct = np.array([False, False, True, True, True, True, True, True, True, True])
    fit = fit_clarify_margin(margin, correct, cost=0.5, max_rate=0.5)
    assert 0.02 < fit.margin <= 0.03  # ask exactly the two wrong ones
    assert fit.errors_avoided == 2
    assert fit.correct_lost == 0
    assert fit.clarify_rate == pytest.approx(0.2)
    # a cheap question also takes the right answer at 0.03 when it comes with more wrong ones
    mixed = fit_clarify_margin(
        np.array([0.01, 0.02, 0.03, 0.04, 0.9]), np.array([False, True, False, True, True]), cost=0.4, max_rate=1.0
    )
    assert 0.03 < mixed.margin <= 0.04  # gain 2 - 0.4 = 1.6 beats 1 (first only) and 2 - 0.8 = 1.2
    assert (mixed.errors_avoided, mixed.correct_lost) == (2, 1)


def test_clarify_never_when_it_does_not_pay() -> None:
    fit = fit_clarify_margin(np.array([0.1, 0.2, 0.3]), np.array([True, True, True]), cost=0.5)
    assert fit.margin == 0.0
    assert fit.clarify_rate == 0.0


def test_clarify_rate_cap() -> None:
    margin = np.linspace(0.0, 1.0, 100)
    correct = margin > 0.5
    fit = fit_clarify_margin(margin, correct, cost=0.1, max_rate=0.2)
    assert fit.clarify_rate <= 0.2


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-5, 5, allow_nan=False), st.booleans(), st.booleans()),
        min_size=1,
        max_size=40,
    ).filter(lambda rows: any(not oos for _, _, oos in rows)),
    st.floats(0, 1),
)
def test_threshold_meets_the_floor_whenever_possible(rows: list[tuple[float, bool, bool]], floor: float) -> None:
    conf = np.array([r[0] for r in rows])
    correct = np.array([r[1] for r in rows])
    is_oos = np.array([r[2] for r in rows])
    fit = fit_threshold(conf, correct, is_oos, oos_recall_floor=floor)
    accepted = conf >= fit.threshold
    if is_oos.any():
        assert fit.feasible  # the threshold above everything always reaches recall 1
        assert (~accepted & is_oos).sum() / is_oos.sum() >= floor - 1e-9
    assert fit.in_scope_accuracy == pytest.approx((accepted & correct & ~is_oos).sum() / (~is_oos).sum())
