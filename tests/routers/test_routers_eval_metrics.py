"""Evaluation figures a user can trust: undefined figures are null with the reason, never 0.0; top-1 accuracy,
the default-route rate, threshold-free OOS separation and the operating threshold, on cases worked by hand."""

from __future__ import annotations

import json

import pytest

from routegate.routers.evaluation import score_decisions
from routegate.routers.semantic import SemanticDecision


def decision(top: str, confidence: float, outcome: str = "route", threshold: float = 0.5) -> SemanticDecision:
    route = "fallback" if outcome == "default" else top
    return SemanticDecision(
        route=route,
        outcome=outcome,  # type: ignore[arg-type]  # a literal of the three outcomes
        top=top,
        score=confidence,
        confidence=confidence,
        margin=0.1,
        runner_up=None,
        runner_up_score=0.0,
        threshold=threshold,
        clarify_margin=0.0,
    )


def test_without_oos_rows_the_oos_figures_are_null_with_the_reason() -> None:
    decisions = [decision("a", 0.9), decision("b", 0.8), decision("b", 0.7)]
    report = score_decisions(decisions, ["a", "b", "a"], "fallback")
    assert report.in_scope_accuracy == pytest.approx(2 / 3)
    assert report.oos_recall is None and report.oos_auroc is None and report.oos_aupr is None
    assert report.oos_precision is None and report.oos_f1 is None  # nothing was sent to the default route either
    assert "no 'oos' rows" in report.undefined["oos_recall"]
    assert "default route" in report.undefined["oos_precision"]
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["oos_recall"] is None and as_json["undefined"]["oos_auroc"]
    assert "n/a (no 'oos' rows in the data)" in report.summary()


def test_top1_default_rate_auroc_and_threshold_on_a_worked_case() -> None:
    decisions = [
        decision("a", 0.95),  # a, right
        decision("b", 0.40, "default"),  # a in scope, but sent to the default route; its top is wrong too
        decision("b", 0.45, "default"),  # b in scope, sent to default; top right
        decision("a", 0.30, "default"),  # oos, caught
        decision("a", 0.90),  # oos, routed: missed
    ]
    report = score_decisions(decisions, ["a", "a", "b", "oos", "oos"], "fallback")
    assert report.in_scope_accuracy == pytest.approx(1 / 3)
    assert report.top1_accuracy == pytest.approx(2 / 3)  # the thresholds do not count here
    assert report.default_route_rate == pytest.approx(2 / 3)
    assert report.oos_precision == pytest.approx(1 / 3)
    assert report.oos_recall == pytest.approx(1 / 2)
    # OOS scored by low confidence: oos confidences {0.30, 0.90} vs in-scope {0.95, 0.40, 0.45}:
    # pairs (oos, in-scope) where the oos one is less confident: 0.30 is below all three, 0.90 only below 0.95
    assert report.oos_auroc == pytest.approx(4 / 6)
    assert report.oos_aupr is not None and 0 < report.oos_aupr <= 1
    assert report.threshold == 0.5
    assert report.undefined == {}


def test_without_in_scope_rows_the_in_scope_figures_are_null() -> None:
    report = score_decisions([decision("a", 0.2, "default")], ["oos"], "fallback")
    assert report.in_scope_accuracy is None and report.top1_accuracy is None and report.default_route_rate is None
    assert report.oos_recall == 1.0 and report.oos_precision == 1.0
    assert report.oos_auroc is None
