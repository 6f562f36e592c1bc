"""The size check of untrusted arguments: one iterative walk, no recursion, stops at the first bound passed.

It runs before anything else touches the value (hashing, schema validation, copying, sending), so none of
those meets a structure nested thousands deep, millions of keys, a gigabyte string or a cycle: a cycle is
infinitely deep and ends at ``max_depth``. Containers are ``Mapping``, ``list`` and ``tuple`` (and sets,
unless ``json_only``); any other value counts as a leaf.

With ``json_only`` (values that will be sent as JSON: tool arguments, A2A context) the walk also refuses what
JSON cannot carry: keys that are not strings, NaN and infinities, and values that are not ``None``, a bool, a
number, a string, an object or an array.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Final

from routegate.core import stop_reasons as sr
from routegate.core.contracts import ArgLimits

_LEAF_BYTES: Final = 8
_BITS_PER_DIGIT: Final = math.log2(10)
_JSON_CONTAINERS: Final = (Mapping, list, tuple)
_CONTAINERS: Final = (Mapping, list, tuple, Set)


@dataclass(frozen=True, slots=True)
class Breach:
    """Why a value is refused: the ``invalid_route`` detail (``too_deep``, ``too_large``, ``bad_args``) and a message."""

    detail: str
    message: str


def _text_bytes(text: str, room: int) -> int:
    """The UTF-8 size of ``text``; not encoded when it cannot fit in ``room`` anyway (a character is >= 1 byte)."""
    if text.isascii() or len(text) > room:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _long_integer(value: int, limits: ArgLimits) -> Breach:
    digits = int(value.bit_length() / _BITS_PER_DIGIT)
    return Breach(sr.TOO_LARGE, f"an integer of about {digits} digits is over max_int_digits={limits.max_int_digits}")


def _over_bytes(max_bytes: int) -> Breach:
    return Breach(sr.TOO_LARGE, f"arguments are larger than max_bytes={max_bytes} (UTF-8 of keys and strings)")


def _leaf(value: object, limits: ArgLimits, json_only: bool) -> int | Breach:
    """The size of a leaf, or why it is refused."""
    if isinstance(value, str):
        return _text_bytes(value, limits.max_bytes)
    if isinstance(value, bool) or value is None:
        return _LEAF_BYTES
    if isinstance(value, int):
        if value.bit_length() > limits.max_int_digits * _BITS_PER_DIGIT:
            return _long_integer(value, limits)
        return _LEAF_BYTES
    if isinstance(value, float):
        if json_only and not math.isfinite(value):
            return Breach(sr.BAD_ARGS, f"{value!r} is not a JSON number; send a finite number")
        return _LEAF_BYTES
    if json_only:
        return Breach(sr.BAD_ARGS, f"a {type(value).__name__} is not a JSON value; send JSON values only")
    return _LEAF_BYTES


def check_bounds(args: Mapping[Any, object], limits: ArgLimits, *, json_only: bool = False) -> Breach | None:
    """``None`` when ``args`` is within ``limits`` (and is JSON, with ``json_only``); otherwise the first breach."""
    max_items, max_bytes, max_depth = limits.max_items, limits.max_bytes, limits.max_depth
    containers = _JSON_CONTAINERS if json_only else _CONTAINERS
    max_int_bits = limits.max_int_digits * _BITS_PER_DIGIT
    items = 0
    size = 0
    stack: list[tuple[object, int]] = [(args, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return Breach(sr.TOO_DEEP, f"arguments are nested deeper than max_depth={max_depth}")
        items += len(node)  # type: ignore[arg-type]  # only containers are pushed
        if items > max_items:
            return Breach(sr.TOO_LARGE, f"arguments hold more than max_items={max_items} keys and array elements")
        children: Iterable[object]
        if isinstance(node, Mapping):
            for key in node:
                if isinstance(key, str):
                    size += len(key) if key.isascii() else _text_bytes(key, max_bytes - size)
                elif json_only:
                    return Breach(sr.BAD_ARGS, f"object keys must be strings, got a {type(key).__name__}")
                else:
                    size += _LEAF_BYTES
            children = node.values()
        else:
            children = node  # type: ignore[assignment]  # a list, tuple or set: only containers are pushed
        for value in children:
            kind = type(value)
            if kind is str:
                text: str = value  # type: ignore[assignment]  # narrowed by the exact type test
                size += len(text) if text.isascii() else _text_bytes(text, max_bytes - size)
                if size > max_bytes:
                    return _over_bytes(max_bytes)
            elif kind is int:
                if value.bit_length() > max_int_bits:  # type: ignore[attr-defined]  # narrowed by the exact type test
                    return _long_integer(value, limits)  # type: ignore[arg-type]  # narrowed by the exact type test
                size += _LEAF_BYTES
            elif kind is dict or kind is list or isinstance(value, containers):
                stack.append((value, depth + 1))
            else:
                leaf = _leaf(value, limits, json_only)
                if isinstance(leaf, Breach):
                    return leaf
                size += leaf
        if size > max_bytes:
            return _over_bytes(max_bytes)
    return None
