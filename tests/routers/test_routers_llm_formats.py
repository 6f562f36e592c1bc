"""Routes as tools and as one strict schema, and the answers read back: pure functions, untrusted input."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.core import RoutePolicy
from routegate.core.contracts import RouteSpec
from routegate.llm.strict import StrictSchemaError, strict_schema, without_strict_nulls
from routegate.llm.structured import ToolCall
from routegate.routers.llm_formats import route_intents, route_schema, route_tools, schema_answer, tool_name


class Address(BaseModel):
    city: str
    zip: str | None = None


class Order(BaseModel):
    order_id: int
    note: str = ""
    tags: list[str] = []
    ship_to: Address | None = None


def test_a_pydantic_schema_is_made_strict() -> None:
    strict = strict_schema(Order.model_json_schema())
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["order_id", "note", "tags", "ship_to"]
    props = strict["properties"]
    assert props["order_id"] == {"type": "integer"}
    assert props["note"] == {"type": ["string", "null"]}  # optional: nullable, default dropped
    assert props["tags"] == {"type": ["array", "null"], "items": {"type": "string"}}
    ship = props["ship_to"]["anyOf"]  # the $ref inlined
    assert ship[0]["properties"]["zip"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert ship[0]["required"] == ["city", "zip"] and ship[0]["additionalProperties"] is False
    assert {"type": "null"} in ship
    assert "$defs" not in json.dumps(strict)


@pytest.mark.parametrize(
    ("schema", "what"),
    [
        ({"type": "object", "additionalProperties": True}, "open object"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "open object"),
        ({"type": "object", "properties": {"x": {}}}, "without a type"),
        ({"type": "object", "properties": {"x": {"not": {"type": "string"}}}}, "not has no strict form"),
        ({"type": "array"}, "without an items schema"),
        (
            {
                "$ref": "#/$defs/Node",
                "$defs": {"Node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/Node"}}}},
            },
            "recursive",
        ),
        ({"allOf": [{"type": "object"}, {"type": "object"}]}, "allOf with 2 parts"),
        ({"$ref": "http://example.com/schema"}, "not to a local definition"),
    ],
)
def test_what_strict_mode_cannot_express_is_named(schema: dict[str, Any], what: str) -> None:
    with pytest.raises(StrictSchemaError, match=what):
        strict_schema(schema)


def test_strict_nulls_are_dropped_only_where_the_schema_does_not_take_null() -> None:
    schema = Order.model_json_schema()
    answer = {"order_id": 3, "note": None, "tags": None, "ship_to": {"city": "Oslo", "zip": None}}
    assert without_strict_nulls(answer, schema) == {"order_id": 3, "ship_to": {"city": "Oslo", "zip": None}}
    # ship_to and zip accept null: kept; a required field's null is the policy's to refuse
    assert without_strict_nulls({"order_id": None}, schema) == {"order_id": None}


def test_tool_names_are_made_valid_and_mapped_back() -> None:
    catalog = (
        RouteSpec("billing.refund", "refunds", {"type": "object"}),
        RouteSpec("billing_refund", "other", {"type": "object"}),
        RouteSpec("x" * 70, "long", {"type": "object"}),
        RouteSpec("ok-name_1", "fine", {"type": "object"}),
    )
    tools = route_tools(catalog, forbidden={"ok-name_1"})
    assert tools.names == ("billing_refund", "billing_refund_2", "x" * 64)
    calls = [ToolCall(name, "{}") for name in tools.names]
    assert [i["target"] for i in route_intents(calls, tools)] == ["billing.refund", "billing_refund", "x" * 70]
    assert tool_name("") == "route"


def test_route_intents_keep_what_the_model_wrote() -> None:
    intents = route_intents(
        [ToolCall("a", '{"x": 1}'), ToolCall("b", ""), ToolCall("c", "{not json"), ToolCall("zz", "[1]")],
        {"a": "A", "b": "B", "c": "C"},
    )
    assert intents == [
        {"kind": "route", "target": "A", "args": {"x": 1}},
        {"kind": "route", "target": "B", "args": {}},
        {"kind": "route", "target": "C", "args": "{not json"},
        {"kind": "route", "target": "zz", "args": [1]},
    ]


def test_the_schema_leaves_forbidden_routes_out_and_reads_the_answer_back() -> None:
    catalog = (
        RouteSpec("a", "A", Order.model_json_schema()),
        RouteSpec("b", "B", {"type": "object", "properties": {}}),
    )
    schema = route_schema(catalog, forbidden={"b"})
    branches = schema.format.schema["properties"]["route"]["anyOf"]
    assert [b["properties"]["target"]["enum"] for b in branches] == [["a"]]
    answer = {
        "route": {"kind": "route", "target": "a", "args": {"order_id": 1, "note": None, "tags": None, "ship_to": None}}
    }
    assert schema_answer(answer, schema) == {"kind": "route", "target": "a", "args": {"order_id": 1, "ship_to": None}}
    other = {"route": {"kind": "route"}, "extra": 1}  # not the one-key wrapper: as it is
    assert schema_answer(other, schema) == other
    with pytest.raises(StrictSchemaError, match="no route is left"):
        route_schema(catalog, forbidden={"a", "b"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@given(name=st.text(max_size=80), arguments=st.text(max_size=200))
def test_any_tool_call_becomes_an_intent_the_policy_judges_without_raising(name: str, arguments: str) -> None:
    policy = RoutePolicy({"A"}, {"A": Address})
    (intent,) = route_intents([ToolCall(name, arguments)], {"a": "A"})
    assert intent["kind"] == "route"
    policy.validate(intent)  # never raises


@given(answer=st.dictionaries(st.text(max_size=8), json_values, max_size=4))
def test_any_schema_answer_is_read_back_without_raising(answer: dict[str, Any]) -> None:
    schema = route_schema((RouteSpec("a", "A", Order.model_json_schema()),))
    read = schema_answer(answer, schema)
    RoutePolicy({"a"}, {"a": Order}).validate(read)
    wrapped = schema_answer({"route": {"kind": "route", "target": "a", "args": answer}}, schema)
    RoutePolicy({"a"}, {"a": Order}).validate(wrapped)


@given(
    schema=st.dictionaries(
        st.sampled_from(
            ["type", "properties", "items", "anyOf", "$ref", "allOf", "enum", "required", "additionalProperties"]
        ),
        json_values,
        max_size=5,
    )
)
@example(schema={"type": "object", "required": 5, "properties": {"a": {"type": "string"}}})
@example(schema={"type": ["object", "array"], "properties": {}, "items": {"type": 1}})
def test_any_schema_is_made_strict_or_refused_by_name(schema: dict[str, Any]) -> None:
    with contextlib.suppress(StrictSchemaError):
        strict_schema(schema)
