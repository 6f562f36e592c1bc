"""Evaluation metrics on hand-made decisions with known answers; the public names of routegate.routers."""

from __future__ import annotations

import io

import pytest

from routegate.routers import SemanticDecision
from routegate.routers.evaluation import progress_bar, score_decisions


def _d(route: str, outcome: str, top: str, confidence: float) -> SemanticDecision:
    return SemanticDecision(
        route=route,
        outcome=outcome,  # type: ignore[arg-type]  # literal values below
        top=top,
        score=0.5,
        confidence=confidence,
        margin=0.1,
        runner_up=None,
        runner_up_score=0.0,
        threshold=0.3,
        clarify_margin=0.0,
    )


def test_metrics_known_answer() -> None:
    decisions = [
        _d("a", "route", "a", 0.9),  # a: right
        _d("b", "route", "b", 0.8),  # a: wrong route
        _d("b", "route", "b", 0.7),  # b: right
        _d("oos", "default", "b", 0.1),  # b: wrongly out of scope
        _d("oos", "default", "a", 0.2),  # oos: right
        _d("a", "route", "a", 0.6),  # oos: missed
        _d("a", "clarify", "a", 0.5),  # a: asked (counts as not routed)
    ]
    labels = ["a", "a", "b", "b", "oos", "oos", "a"]
    report = score_decisions(decisions, labels, "oos", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    assert report.n_in_scope == 5
    assert report.n_oos == 2
    assert report.in_scope_accuracy == pytest.approx(2 / 5)
    assert report.oos_recall == pytest.approx(1 / 2)
    assert report.oos_precision == pytest.approx(1 / 2)
    assert report.oos_f1 == pytest.approx(0.5)
    assert report.clarify_rate == pytest.approx(1 / 7)
    assert report.per_route["a"] == {"precision": 0.5, "recall": pytest.approx(1 / 3), "support": 3.0}
    assert report.per_route["b"]["precision"] == pytest.approx(1 / 2)
    assert report.confusion["a"] == {"a": 1, "b": 1, "clarify": 1}
    assert report.confusion["oos"] == {"oos": 1, "a": 1}
    assert report.latency_ms_p50 == 4.0
    # risk-coverage judges the top route before any threshold: wrong are the a->b row and both oos rows
    assert report.risk_coverage[0] == (pytest.approx(1 / 7, abs=1e-4), 0.0)
    assert report.risk_coverage[-1] == (1.0, pytest.approx(3 / 7, abs=1e-4))
    assert report.tradeoff
    assert set(report.to_dict()) >= {"in_scope_accuracy", "oos_recall", "oos_precision", "latency_ms_p50"}
    assert "in-scope accuracy" in report.summary()


def test_empty_evaluation() -> None:
    report = score_decisions([], [], "oos")
    assert report.n == 0
    assert report.risk_coverage == []


def test_progress_bar_writes_to_its_stream() -> None:
    stream = io.StringIO()
    bar = progress_bar(stream, width=10)
    bar(5, 10)
    bar(10, 10)
    assert "5/10" in stream.getvalue()
    assert stream.getvalue().endswith("10/10\n")
