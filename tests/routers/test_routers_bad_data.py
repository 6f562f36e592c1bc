"""Data a router cannot be fitted or scored on is refused with the reason, never turned into a degenerate router
(threshold -1e9) or a report of zeros."""

from __future__ import annotations

from pathlib import Path

import pytest

from routegate.embed import HashingEncoder
from routegate.errors import ConfigurationError
from routegate.routers import FitConfig, LabelledExample, SemanticRouter, evaluate
from routegate.routers.data import load_examples

ROUTES = {
    "POSTGRES": ["status of ticket 12", "show customer 3", "tickets for John", "open tickets"],
    "VECTOR": ["how do I reset my password", "refund policy", "escalate a ticket", "password help"],
}


@pytest.fixture(scope="module")
def router() -> SemanticRouter:
    return SemanticRouter.from_routes(ROUTES, encoder=HashingEncoder(dim=256), default_route="LLM")


def _rows(*pairs: tuple[str, str]) -> list[LabelledExample]:
    return [LabelledExample(text, label) for text, label in pairs]


def test_fit_refuses_a_single_label() -> None:
    three = _rows(("a b", "ONLY"), ("c d", "ONLY"), ("e f", "ONLY"))
    with pytest.raises(ConfigurationError, match="at least 2 labels") as refused:
        SemanticRouter.fit(three, encoder=HashingEncoder(dim=64))
    assert "'ONLY'" in str(refused.value)


def test_one_route_with_out_of_scope_examples_is_enough() -> None:
    rows = _rows(("a b", "ONLY"), ("c d", "ONLY"), ("e f", "ONLY"), ("zzz", "oos"), ("qqq", "oos"))
    router = SemanticRouter.fit(rows, encoder=HashingEncoder(dim=64), default_route="LLM")
    assert abs(router.calibration.threshold) < 1e6  # a real threshold, not the degenerate -1e9


def test_fit_refuses_too_few_examples_per_route_saying_the_minimum() -> None:
    rows = _rows(("a", "A"), ("aa", "A"), ("aaa", "A"), ("b", "B"), ("c", "C"))
    with pytest.raises(ConfigurationError, match=">= 3 examples per route") as refused:
        SemanticRouter.fit(rows, encoder=HashingEncoder(dim=64), config=FitConfig(min_examples_per_route=3))
    assert "'B' (1)" in str(refused.value) and "'C' (1)" in str(refused.value)
    with pytest.raises(ConfigurationError, match="min_examples_per_route"):
        FitConfig(min_examples_per_route=0)


def test_eval_refuses_unknown_labels_listing_them(router: SemanticRouter) -> None:
    rows = _rows(("ticket 12", "POSTGRES"), ("weather", "WEATHER"), ("bitcoin", "CRYPTO"), ("rain", "WEATHER"))
    with pytest.raises(ConfigurationError) as refused:
        evaluate(router, rows)
    message = str(refused.value)
    assert "3 of 4 rows" in message
    assert "'CRYPTO' (1 rows)" in message and "'WEATHER' (2 rows)" in message
    assert "--unknown-as-oos" in message


def test_eval_can_score_unknown_labels_as_out_of_scope(router: SemanticRouter) -> None:
    rows = _rows(("ticket 12", "POSTGRES"), ("weather", "WEATHER"), ("bitcoin", "CRYPTO"), ("rain", "WEATHER"))
    report = evaluate(router, rows, unknown_labels="oos")
    assert (report.n_in_scope, report.n_oos) == (1, 3)
    assert report.unknown_as_oos == {"CRYPTO": 1, "WEATHER": 2}
    assert report.to_dict()["unknown_as_oos"] == {"CRYPTO": 1, "WEATHER": 2}
    assert "scored as out of scope: CRYPTO 1, WEATHER 2" in report.summary()


def test_eval_refuses_empty_data(router: SemanticRouter) -> None:
    with pytest.raises(ConfigurationError, match="no examples"):
        evaluate(router, [])


def test_a_file_that_is_not_utf8_is_refused_with_the_byte(tmp_path: Path) -> None:
    data = tmp_path / "latin1.jsonl"
    data.write_bytes('{"text": "café", "label": "A"}\n'.encode("latin-1"))
    with pytest.raises(ConfigurationError, match=r"not UTF-8 text \(byte 0xE9 at byte offset 13\)"):
        load_examples(data)
