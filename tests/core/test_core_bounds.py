"""Argument bounds at the policy boundary, and hashing / jsonable that never raise for depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.core import ArgLimits, RoutePolicy, worker
from routegate.core._bounds import check_bounds
from routegate.core.contracts import RouteIntent, jsonable
from routegate.core.hashing import _canonical_iterative, args_hash, canonical_args
from routegate.errors import ConfigurationError
from routegate.plan import RoutingAgent
from routegate.testing import ScriptedRouter


def nested(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth - 1):
        value = {"k": value}
    return {"k": value}


def decision(args: object) -> dict[str, object]:
    return {"kind": "route", "target": "t", "args": args}


POLICY = RoutePolicy({"t"})


@pytest.mark.parametrize("depth", [33, 300, 500, 10_000])
def test_deep_args_are_refused(depth: int) -> None:
    verdict = POLICY.validate(decision(nested(depth)))
    assert verdict == POLICY.validate(decision(nested(depth + 1)))
    assert verdict.stop_reason == "invalid_route:too_deep"  # type: ignore[union-attr]
    assert verdict.message == "route to 't': arguments are nested deeper than max_depth=32"  # type: ignore[union-attr]


def test_depth_32_passes_and_counts_lists_too() -> None:
    assert isinstance(POLICY.validate(decision(nested(32))), RouteIntent)
    deep_list: Any = 1
    for _ in range(32):
        deep_list = [deep_list]
    assert POLICY.validate(decision({"x": deep_list})).stop_reason == "invalid_route:too_deep"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"x": "y" * 1_000_001}, "max_bytes=1000000"),
        ({"y" * 1_000_001: 1}, "max_bytes=1000000"),
        ({f"k{i}": 1 for i in range(10_001)}, "max_items=10000"),
        ({"x": list(range(10_001))}, "max_items=10000"),
        ({"x": 10**1001}, "max_int_digits=1000"),
    ],
)
def test_large_args_are_refused(args: dict[str, Any], words: str) -> None:
    verdict = POLICY.validate(decision(args))
    assert verdict.stop_reason == "invalid_route:too_large", verdict  # type: ignore[union-attr]
    assert words in verdict.message  # type: ignore[union-attr]


def test_json_only_refuses_what_json_cannot_carry() -> None:
    strict = RoutePolicy({"t"}, json_only=True)
    for args in ({"x": float("nan")}, {1: "x"}, {"x": b"x"}, {"x": {1, 2}}, {"x": object()}):
        verdict = strict.validate(decision(args))
        assert verdict.stop_reason == "invalid_route:bad_args", args  # type: ignore[union-attr]
    # the default policy (the routing agent's) keeps accepting Python values its schemas may take
    assert isinstance(POLICY.validate(decision({"x": {1, 2}, "y": float("nan")})), RouteIntent)


def test_limits_are_configurable_and_checked() -> None:
    tight = RoutePolicy({"t"}, limits=ArgLimits(max_depth=2, max_items=3, max_bytes=10))
    assert tight.limits.max_depth == 2
    assert tight.validate(decision({"a": {"b": 1}})).args == {"a": {"b": 1}}  # type: ignore[union-attr]
    assert tight.validate(decision({"a": {"b": [1]}})).stop_reason == "invalid_route:too_deep"  # type: ignore[union-attr]
    assert tight.validate(decision({"a": 1, "b": 2, "c": 3, "d": 4})).stop_reason == "invalid_route:too_large"  # type: ignore[union-attr]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigurationError, match=r"ArgLimits\.max_depth must be an integer >= 1"):
            ArgLimits(max_depth=bad)  # type: ignore[arg-type]  # misuse on purpose
    with pytest.raises(ConfigurationError, match="at most 4000"):
        ArgLimits(max_int_digits=5000)


def test_the_routing_agent_stops_on_deep_args_and_its_result_is_json() -> None:
    called: list[str] = []

    @worker
    def t(ticket: str) -> dict[str, Any]:
        called.append(ticket)
        return {"status": "done", "result": "x"}

    deep = {"ticket": "x", "extra": nested(10_000)}
    agent = RoutingAgent(workers=[t], router=ScriptedRouter([decision(deep)]))
    result = agent.run("help")
    assert (result.stop_reason, result.phase) == ("invalid_route:too_deep", "route")
    assert called == []
    json.dumps(result.to_dict())  # the kept raw decision is cut at jsonable's depth, not a RecursionError


def test_args_hash_never_raises_for_depth_or_long_integers() -> None:
    assert args_hash(nested(50_000)) == args_hash(nested(50_000))
    assert args_hash(nested(50_000)) != args_hash(nested(50_001))
    assert args_hash({"n": 10**5000}) != args_hash({"n": 10**5000 + 1})
    cycle: dict[str, Any] = {}
    cycle["c"] = cycle
    with pytest.raises(ValueError, match="Circular"):
        args_hash(cycle)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=5), JSON, max_size=5))
def test_the_iterative_encoding_is_the_canonical_text(args: dict[str, Any]) -> None:
    assert _canonical_iterative(args) == canonical_args(args)


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=5), JSON, max_size=5), st.integers(1, 6))
def test_the_depth_bound_matches_a_recursive_count(args: dict[str, Any], max_depth: int) -> None:
    breach = check_bounds(args, ArgLimits(max_depth=max_depth))
    assert (breach is not None and breach.detail == "too_deep") == (_depth(args) > max_depth)


def test_jsonable_cuts_deep_values_and_long_integers() -> None:
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    cut = json.dumps(jsonable({"v": deep, "n": 10**5000}))
    assert "nested deeper than 100 levels" in cut and "integer of 16610 bits" in cut
    assert jsonable({"a": (1, 2.5, float("inf"))}) == {"a": [1, 2.5, "inf"]}


def test_a_mapping_that_fails_when_read_is_refused_not_raised() -> None:
    class Broken(dict[str, Any]):
        def __len__(self) -> int:
            return -1  # len() raises ValueError

    verdict = POLICY.validate(decision({"x": Broken(a=1)}))
    assert verdict.stop_reason == "invalid_route:bad_args"  # type: ignore[union-attr]
    assert verdict.message == "args could not be read (ValueError)"  # type: ignore[union-attr]
