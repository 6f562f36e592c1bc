"""The hand-written corpus: realistic agent outputs with their expected kind and extractions."""

from __future__ import annotations

import json
import runpy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from routegate.technique import TechniqueRouter

DATA = Path(__file__).with_name("data")
CASES: list[dict[str, Any]] = [
    json.loads(line) for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line
]
ROUTER = TechniqueRouter()


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(CASES) >= 100
    kinds = Counter(case["kind"] for case in CASES)
    assert set(kinds) == {"prose", "code_block", "tool_call", "a2a_request"}
    categories = {case["category"] for case in CASES}
    for needed in ("inline_code", "nested", "unterminated", "malformed_json", "mixed", "non_english", "tool_tag"):
        assert needed in categories


def test_corpus_file_matches_its_source() -> None:
    source = runpy.run_path(str(DATA / "make_corpus.py"))
    assert source["CASES"] == CASES


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    got = ROUTER.classify(case["text"]).to_dict()
    assert got["kind"] == case["kind"]
    assert got["code_blocks"] == case["code_blocks"]
    assert got["tool_calls"] == case["tool_calls"]
    assert got["a2a_requests"] == case["a2a_requests"]
