"""The policy boundary: every invalid_route:* reason, normalisation, and a property test over any input."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.core import RoutePolicy, TicketArgs
from routegate.core.contracts import RouteIntent
from routegate.core.policy import RouteRejection

TARGETS = {"billing_specialist", "technical_specialist", "sales_specialist"}
POLICY = RoutePolicy(TARGETS, dict.fromkeys(TARGETS, TicketArgs))


def reason(raw: object, **kwargs: object) -> str:
    verdict = POLICY.validate(raw, **kwargs)  # type: ignore[arg-type]
    assert isinstance(verdict, RouteRejection), verdict
    return verdict.stop_reason


def ok(raw: object, **kwargs: object) -> RouteIntent:
    verdict = POLICY.validate(raw, **kwargs)  # type: ignore[arg-type]
    assert isinstance(verdict, RouteIntent), verdict
    return verdict


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("this is not json", "invalid_route:non_json"),
        (b"\xff\xfe", "invalid_route:non_json"),
        ("[1, 2]", "invalid_route:not_object"),
        (["kind", "route"], "invalid_route:not_object"),
        (None, "invalid_route:not_object"),
        (42, "invalid_route:not_object"),
        ({"target": "billing_specialist", "args": {"ticket": "x"}}, "invalid_route:bad_kind"),
        ({"kind": "invalid", "target": "billing_specialist"}, "invalid_route:bad_kind"),
        (
            {"kind": "route", "target": "billing_specialist", "args": {"ticket": "x"}, "why": "!"},
            "invalid_route:extra_keys",
        ),
        ({"kind": "route", "args": {"ticket": "x"}}, "invalid_route:missing_target"),
        ({"kind": "route", "target": "   ", "args": {"ticket": "x"}}, "invalid_route:missing_target"),
        ({"kind": "route", "target": 7, "args": {"ticket": "x"}}, "invalid_route:missing_target"),
        (
            {"kind": "route", "target": "refund_bot", "args": {"ticket": "x"}},
            "invalid_route:route_not_allowed:refund_bot",
        ),
        ({"kind": "route", "target": "billing_specialist", "args": ["x"]}, "invalid_route:bad_args"),
        ({"kind": "route", "target": "billing_specialist", "args": "ticket"}, "invalid_route:bad_args"),
        ({"kind": "route", "target": "billing_specialist"}, "invalid_route:missing_ticket"),
        ({"kind": "route", "target": "billing_specialist", "args": None}, "invalid_route:missing_ticket"),
        ({"kind": "route", "target": "billing_specialist", "args": {}}, "invalid_route:missing_ticket"),
        (
            {"kind": "route", "target": "billing_specialist", "args": {"ticket": "  \n "}},
            "invalid_route:missing_ticket",
        ),
        ({"kind": "route", "target": "billing_specialist", "args": {"ticket": None}}, "invalid_route:missing_ticket"),
        ({"kind": "route", "target": "billing_specialist", "args": {"ticket": 12}}, "invalid_route:bad_args"),
        (
            {"kind": "route", "target": "billing_specialist", "args": {"ticket": "x", "user": 1}},
            "invalid_route:bad_args",
        ),
    ],
)
def test_each_invalid_decision_has_its_stop_reason(raw: object, expected: str) -> None:
    assert reason(raw) == expected


def test_json_text_is_parsed_and_raw_text_rejections_name_the_problem() -> None:
    intent = ok(json.dumps({"kind": "route", "target": "sales_specialist", "args": {"ticket": "quote please"}}))
    assert intent.target == "sales_specialist"
    verdict = POLICY.validate("{oops")
    assert isinstance(verdict, RouteRejection)
    assert "not valid JSON" in verdict.message


def test_target_and_ticket_whitespace_is_normalised() -> None:
    intent = ok({"kind": "route", "target": "  billing_specialist\n", "args": {"ticket": "  refund \n\t please  "}})
    assert intent.target == "billing_specialist"
    assert intent.args == {"ticket": "refund please"}
    assert intent.to_dict() == {"kind": "route", "target": "billing_specialist", "args": {"ticket": "refund please"}}


def test_same_target_after_needs_reroute_is_refused_but_another_is_allowed() -> None:
    raw = {"kind": "route", "target": "billing_specialist", "args": {"ticket": "x"}}
    assert (
        reason(raw, previous_target="billing_specialist", previous_status="needs_reroute")
        == "invalid_route:repeat_target_after_reroute"
    )
    assert ok(raw, previous_target="billing_specialist", previous_status="done").target == "billing_specialist"
    assert ok(raw, previous_target="sales_specialist", previous_status="needs_reroute").target == "billing_specialist"


def test_a_target_allowed_without_schema_only_needs_an_args_object() -> None:
    policy = RoutePolicy({"ghost"})
    assert isinstance(policy.validate({"kind": "route", "target": "ghost", "args": {"x": 1}}), RouteIntent)
    assert isinstance(policy.validate({"kind": "route", "target": "ghost"}), RouteIntent)


def test_schemas_name_the_missing_field_generically() -> None:
    class Lookup(BaseModel):
        order_id: int
        note: str = ""

    policy = RoutePolicy({"orders"}, {"orders": Lookup})
    rejection = policy.validate({"kind": "route", "target": "orders", "args": {"note": "n"}})
    assert isinstance(rejection, RouteRejection)
    assert rejection.stop_reason == "invalid_route:missing_order_id"
    assert "order_id" in rejection.message
    wrong_type = policy.validate({"kind": "route", "target": "orders", "args": {"order_id": "twelve"}})
    assert isinstance(wrong_type, RouteRejection)
    assert wrong_type.stop_reason == "invalid_route:bad_args"


def test_untrusted_target_text_is_bounded_in_the_stop_reason() -> None:
    evil = "x" * 500 + "\n\x00:drop"
    stop = reason({"kind": "route", "target": evil, "args": {"ticket": "t"}})
    assert stop.startswith("invalid_route:route_not_allowed:")
    detail = stop.removeprefix("invalid_route:route_not_allowed:")
    assert len(detail) <= 64
    assert detail.isprintable()
    assert "\n" not in detail


KNOWN = re.compile(
    r"^invalid_route:(not_object|non_json|bad_kind|extra_keys|missing_target|bad_args|missing_ticket"
    r"|repeat_target_after_reroute|route_not_allowed:\S{1,64})$"
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
route_like = st.fixed_dictionaries(
    {"kind": st.sampled_from(["route", "Route", "invalid", ""]) | st.text(max_size=5)},
    optional={
        "target": st.sampled_from(sorted(TARGETS)) | st.text(max_size=20) | json_values,
        "args": st.fixed_dictionaries({}, optional={"ticket": st.text(max_size=30) | json_values}) | json_values,
        "extra": json_values,
    },
)


@settings(max_examples=400, deadline=None)
@given(raw=json_values | route_like | st.text() | route_like.map(json.dumps) | st.binary(max_size=40))
def test_any_router_output_gives_a_valid_route_or_a_known_stop(raw: object) -> None:
    verdict = POLICY.validate(raw, previous_target="sales_specialist", previous_status="needs_reroute")
    if isinstance(verdict, RouteIntent):
        assert verdict.target in TARGETS
        assert verdict.target != "sales_specialist"
        assert isinstance(verdict.args["ticket"], str)
        assert verdict.args["ticket"].strip() == verdict.args["ticket"] != ""
    else:
        assert isinstance(verdict, RouteRejection)
        assert KNOWN.match(verdict.stop_reason), verdict.stop_reason
        assert verdict.message
