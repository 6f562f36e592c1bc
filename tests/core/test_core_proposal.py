"""A typed proposal (``RouteDecision.proposed``) is judged by the policy exactly as its raw ``{"kind": "route"}`` form:
typed means no shape to parse, not no validation. Same allowlist, same argument bounds and schema, same stop
reasons and messages, and the run shows the same ``raw_route``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core._scripted import ListRouter, route
from routegate.apps.triage import SPECIALISTS, build_triage_agent
from routegate.core import ArgLimits, RouteDecision, RoutePolicy, TicketArgs
from routegate.core.contracts import RouteIntent, RouteProposal, jsonable
from routegate.core.policy import RouteRejection
from routegate.plan import RoutingAgent
from routegate.routers import KeywordRouter

TARGETS = {"billing_specialist", "technical_specialist", "sales_specialist"}
SCHEMA_POLICY = RoutePolicy(TARGETS, dict.fromkeys(TARGETS, TicketArgs))
PLAIN_POLICY = RoutePolicy(TARGETS | {"free"})
TIGHT_POLICY = RoutePolicy(TARGETS, limits=ArgLimits(max_depth=2, max_items=5, max_bytes=64), json_only=True)
POLICIES = (SCHEMA_POLICY, PLAIN_POLICY, TIGHT_POLICY)
REFUND = "refund for user_id=42, charged twice"

json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
targets = st.one_of(
    st.sampled_from(sorted(TARGETS | {"free"})),
    st.sampled_from(["  billing_specialist ", "refund_bot", "", "   ", "billing_specialist\x00"]),
    st.text(max_size=20),
    st.none(),
    st.integers(),
)
ticket_args = st.fixed_dictionaries(
    {"ticket": st.one_of(st.text(max_size=30), st.none(), st.integers(), st.just("  \n "))},
    optional={"priority": json_values, "extra": json_values},
)
args_values = st.one_of(ticket_args, st.dictionaries(st.text(max_size=8), json_values, max_size=4), json_values)
previous = st.one_of(
    st.just((None, None)),
    st.tuples(st.sampled_from(sorted(TARGETS)), st.sampled_from(["needs_reroute", "done", None])),
)


def verdict_view(verdict: RouteIntent | RouteRejection) -> tuple[object, ...]:
    if isinstance(verdict, RouteRejection):
        return ("refused", verdict.stop_reason, verdict.message)
    return ("accepted", verdict.target, dict(verdict.args))


@settings(max_examples=300, deadline=None)
@given(target=targets, args=args_values, policy=st.sampled_from(POLICIES), prev=previous)
def test_a_typed_proposal_gets_the_verdict_of_its_raw_form(
    target: Any, args: Any, policy: RoutePolicy, prev: tuple[str | None, str | None]
) -> None:
    previous_target, previous_status = prev
    raw = {"kind": "route", "target": target, "args": args}
    typed = RouteProposal(target, args)
    expected = policy.validate(raw, previous_target=previous_target, previous_status=previous_status)
    got = policy.validate(typed, previous_target=previous_target, previous_status=previous_status)
    assert verdict_view(got) == verdict_view(expected)
    assert jsonable(typed) == jsonable(raw)  # what a run shows as raw_route


@pytest.mark.parametrize(
    ("target", "args", "expected"),
    [
        ("refund_bot", {"ticket": REFUND}, "invalid_route:route_not_allowed:refund_bot"),
        ("  ", {"ticket": REFUND}, "invalid_route:missing_target"),
        ("billing_specialist", {}, "invalid_route:missing_ticket"),
        ("billing_specialist", {"ticket": "  "}, "invalid_route:missing_ticket"),
        ("billing_specialist", {"ticket": 7}, "invalid_route:bad_args"),
        ("billing_specialist", ["ticket"], "invalid_route:bad_args"),
    ],
)
def test_a_typed_proposal_with_a_disallowed_target_or_bad_args_is_refused(
    target: str, args: Any, expected: str
) -> None:
    verdict = SCHEMA_POLICY.validate(RouteDecision.proposed(target, args).raw)
    assert isinstance(verdict, RouteRejection) and verdict.stop_reason == expected


def test_a_typed_proposal_over_the_argument_bounds_is_refused() -> None:
    deep: dict[str, Any] = {"ticket": REFUND, "a": {"b": {"c": 1}}}
    verdict = TIGHT_POLICY.validate(RouteProposal("billing_specialist", deep))
    assert isinstance(verdict, RouteRejection) and verdict.stop_reason == "invalid_route:too_deep"
    verdict = TIGHT_POLICY.validate(RouteProposal("billing_specialist", {"ticket": float("nan")}))
    assert isinstance(verdict, RouteRejection) and verdict.stop_reason == "invalid_route:bad_args"


def test_a_typed_proposal_may_carry_any_mapping_and_one_that_fails_when_read_is_refused() -> None:
    verdict = SCHEMA_POLICY.validate(RouteProposal("billing_specialist", MappingProxyType({"ticket": REFUND})))
    assert verdict == RouteIntent("billing_specialist", {"ticket": REFUND})

    class Broken(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

        def __iter__(self) -> Any:
            raise RuntimeError("boom")

        def __len__(self) -> int:
            return 1

    verdict = SCHEMA_POLICY.validate(RouteProposal("billing_specialist", Broken()))
    assert isinstance(verdict, RouteRejection)
    assert (verdict.stop_reason, verdict.message) == ("invalid_route:bad_args", "args could not be read (RuntimeError)")


def test_a_run_refusing_a_typed_proposal_stops_as_for_the_raw_one_and_shows_the_same_raw_route() -> None:
    allowed = {"technical_specialist", "sales_specialist"}
    typed = build_triage_agent(
        router=ListRouter([RouteProposal("billing_specialist", {"ticket": REFUND})]), policy_allow=allowed
    ).run(REFUND)
    raw = build_triage_agent(router=ListRouter([route("billing_specialist")]), policy_allow=allowed).run(REFUND)
    for result in (typed, raw):
        assert (result.status, result.stop_reason, result.phase) == (
            "stopped",
            "invalid_route:route_not_allowed:billing_specialist",
            "route",
        )
    assert typed.message == raw.message
    assert typed.to_dict()["raw_route"] == raw.to_dict()["raw_route"] == route("billing_specialist")
    assert typed.raw_route == RouteProposal("billing_specialist", {"ticket": REFUND})


def test_the_keyword_router_proposes_typed_and_its_bad_args_are_still_refused() -> None:
    blank = KeywordRouter({"billing_specialist": ["refund"]}, args=lambda request: {"ticket": "   "})
    result = build_triage_agent(router=blank).run(REFUND)
    assert (result.stop_reason, result.phase) == ("invalid_route:missing_ticket", "route")
    assert result.to_dict()["raw_route"] == {"kind": "route", "target": "billing_specialist", "args": {"ticket": "   "}}
    assert isinstance(result.raw_route, RouteProposal)
    assert result.trace[-1].decided_by == "rules" and result.trace[-1].stop_reason == "invalid_route:missing_ticket"


def test_an_observed_refusal_of_a_typed_proposal_names_its_target_in_the_history_as_the_raw_one_does() -> None:
    allowed = {"technical_specialist", "sales_specialist", "billing_specialist"}

    def run(first: object) -> list[tuple[str, str]]:
        router = ListRouter([first, route("billing_specialist")])
        agent = RoutingAgent(workers=SPECIALISTS, router=router, policy_allow=allowed, on_refusal="observe")
        result = agent.run(REFUND)
        assert result.ok and result.selected_route == "billing_specialist", result.to_dict()
        return [(e.route.target, str(e.observation.get("stop_reason"))) for e in result.history]

    typed = run(RouteProposal("  refund_bot ", {"ticket": REFUND}))
    assert typed == run({"kind": "route", "target": "  refund_bot ", "args": {"ticket": REFUND}})
    assert typed[0] == ("refund_bot", "invalid_route:route_not_allowed:refund_bot")
