"""The when DSL: every verb on pydantic, dataclass, dict and scalar payloads; strict mode; escape hatches;
combinators; readable descriptions."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from routegate.errors import ConfigurationError
from routegate.plan import Envelope, ErrorInfo, PlanCompileError, when


class Model(BaseModel):
    items: list[str]
    severity: str | None
    score: float
    approved: bool


@dataclasses.dataclass
class DC:
    items: list[str]
    severity: str | None
    score: float
    approved: bool


def payloads(**fields: Any) -> list[Any]:
    return [Model(**fields), DC(**fields), dict(fields)]


BASE = {"items": ["a"], "severity": "urgent", "score": 0.7, "approved": False}


@pytest.mark.parametrize("payload", payloads(**BASE))
def test_every_verb(payload: Any) -> None:
    env = Envelope(payload)
    assert when.field("items").not_empty()(env) and not when.field("items").empty()(env)
    assert when.field("severity").equals("urgent")(env) and not when.field("severity").not_equals("urgent")(env)
    assert when.field("approved").is_(False)(env) and not when.field("approved").is_(0)(env)
    assert when.field("severity").in_({"urgent", "high"})(env) and not when.field("severity").not_in_(["urgent"])(env)
    assert when.field("score").greater_than(0.5)(env) and not when.field("score").less_than(0.5)(env)
    assert when.field("severity").matches(r"^urg")(env) and not when.field("severity").matches(r"^x")(env)


@pytest.mark.parametrize("payload", payloads(items=[], severity=None, score=0.0, approved=True))
def test_empty_none_and_zero(payload: Any) -> None:
    env = Envelope(payload)
    assert when.field("items").empty()(env)
    assert when.field("severity").empty()(env)  # None is empty
    assert not when.field("score").empty()(env)  # numbers are never empty
    assert not when.field("severity").greater_than(1)(env) and not when.field("severity").less_than(1)(env)
    assert not when.field("severity").matches(".*")(env)  # not a string


def test_missing_fields_read_as_none_unless_strict() -> None:
    for payload in ({"a": 1}, Model(**BASE), "a string", 3, None, ["items"]):
        env = Envelope(payload)
        assert when.field("count").empty()(env), payload  # "a string".count is a method, never a field
        with pytest.raises(AttributeError, match="strict=True"):
            when.field("count", strict=True).empty()(env)


def test_mappings_are_read_by_key_never_by_method() -> None:
    from types import MappingProxyType

    env = Envelope(MappingProxyType({"severity": "spam"}))
    assert when.field("severity").equals("spam")(env)
    assert when.field("items").empty()(env)  # dict.items is not the field "items"


def test_membership_with_unhashable_values() -> None:
    assert not when.field("items").in_({"a"})(Envelope({"items": ["a"]}))  # a list is not in a set of strings
    assert when.field("items").in_([["a"], ["b"]])(Envelope({"items": ["a"]}))
    with pytest.raises(PlanCompileError, match="not a string"):
        when.field("x").in_("abc")
    with pytest.raises(PlanCompileError, match="collection of values, got int"):
        when.field("x").in_(3)  # type: ignore[arg-type]


def test_errored_envelopes() -> None:
    failed = Envelope(error=ErrorInfo.from_exception(ValueError("x")))
    assert when.errored()(failed) and not when.errored()(Envelope(1))
    assert not when.field("x").empty()(failed)
    assert not when.field("x", strict=True).empty()(failed)  # an error is not a typo
    assert not when.payload(lambda p: True)(failed)
    assert when.envelope(lambda env: env.error is not None)(failed)


def test_escape_hatches_and_combinators() -> None:
    env = Envelope({"score": 0.2, "topic": "medical"})
    low = when.payload(lambda p: p["score"] < 0.5)
    sensitive = when.field("topic").in_({"medical", "legal"})
    assert (low & sensitive)(env) and (low | when.errored())(env) and not (~low)(env)
    assert (low & (lambda e: True))(env)
    # misuse while building a predicate is a build error (a ConfigurationError), not a TypeError
    with pytest.raises(PlanCompileError, match="combine a predicate with a callable"):
        low & 3  # type: ignore[operator]
    with pytest.raises(PlanCompileError, match=r"when.payload\(\) takes a callable of the payload"):
        when.payload(3)  # type: ignore[arg-type]
    with pytest.raises(PlanCompileError, match=r"when.envelope\(\) takes a callable"):
        when.envelope("x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="non-empty field name"):
        when.field("")


def is_big(payload: Any) -> bool:
    return bool(payload)


def test_descriptions_are_readable() -> None:
    assert repr(when.field("items").empty()) == "when.field('items').empty()"
    assert repr(when.field("items", strict=True).not_empty()) == "when.field('items', strict=True).not_empty()"
    assert repr(when.field("kind").in_({"b", "a"})) == "when.field('kind').in_({'a', 'b'})"
    assert repr(when.field("s").matches(r"^u")) == "when.field('s').matches('^u')"
    assert repr(when.payload(is_big)) == "when.payload(is_big)"
    assert repr(when.errored() | ~when.field("a").is_(True)) == "(when.errored() | ~when.field('a').is_(True))"
    assert repr(when.field("x")) == "when.field('x')"


def test_comparisons_on_values_that_do_not_compare() -> None:
    env = Envelope({"score": "high"})
    assert not when.field("score").greater_than(0.5)(env) and not when.field("score").less_than(0.5)(env)
    with pytest.raises(TypeError):
        when.field("score", strict=True).greater_than(0.5)(env)
    with pytest.raises(TypeError):
        when.field("score", strict=True).less_than(0.5)(env)
