"""args_hash: whitespace-insensitive, order-insensitive, and the string fast path equals the general encoder."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from routegate.core.hashing import _CANONICAL, _normalize, args_hash, canonical_args


def test_whitespace_and_key_order_do_not_change_the_hash() -> None:
    assert args_hash({"ticket": "refund  please", "b": "x"}) == args_hash({"b": " x", "ticket": " refund please "})
    assert args_hash({"ticket": "refund please"}) != args_hash({"ticket": "refund, please"})
    assert len(args_hash({})) == 12


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=30), max_size=5))
def test_the_string_fast_path_is_the_general_canonical_json(args: dict[str, str]) -> None:
    assert canonical_args(args) == _CANONICAL.encode(_normalize(args))
    assert json.loads(canonical_args(args)) == _normalize(args)


def test_nested_and_non_string_arguments_take_the_general_path() -> None:
    args = {"ticket": "a  b", "n": 3, "tags": ["x  y", 2], "meta": {"k": " v "}}
    assert canonical_args(args) == '{"meta":{"k":"v"},"n":3,"tags":["x y",2],"ticket":"a b"}'
