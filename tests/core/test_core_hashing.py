"""args_hash: whitespace-insensitive, order-insensitive, and the string fast path equals the general encoder."""

from __future__ import annotations

import hashlib
import json

from hypothesis import example, given, settings
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


# printable ASCII and what the plain-text shortcut must notice: spaces (doubled, leading, trailing), a quote, a
# backslash, control characters, other whitespace (tab, newline, U+001F, NBSP, U+2028) and a non-ASCII letter
_TRICKY = st.text(
    st.sampled_from([*"ab Z~!", " ", '"', "\\", "\t", "\n", "\x1f", "\x7f", "\xa0", "\u2028", "é"]), max_size=12
)


@given(st.dictionaries(st.text(max_size=4), _TRICKY, max_size=3))
@example({"t": "a "})
@example({"t": " a"})
@example({"t": "a  b"})
@example({"t": "a\\b", "u": 'a"b'})
@example({"t": "a\x1fb", "u": "a\x7fb"})
@settings(max_examples=300)
def test_args_hash_is_sha256_of_the_general_canonical_json(args: dict[str, str]) -> None:
    general = _CANONICAL.encode(_normalize(args))
    assert canonical_args(args) == general
    assert args_hash(args) == hashlib.sha256(general.encode()).hexdigest()[:12]


def test_the_hash_of_a_known_argument_set_is_pinned() -> None:
    # loop guards compare these digests and checkpoints may store them: the bytes must never change
    assert args_hash({"ticket": "refund please"}) == "b85837a90c5f"
    assert args_hash({"ticket": " refund\tplease ", "b": 'say "hi"'}) == "f00f2647c8aa"


def test_nested_and_non_string_arguments_take_the_general_path() -> None:
    args = {"ticket": "a  b", "n": 3, "tags": ["x  y", 2], "meta": {"k": " v "}}
    assert canonical_args(args) == '{"meta":{"k":"v"},"n":3,"tags":["x y",2],"ticket":"a b"}'
