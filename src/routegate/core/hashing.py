"""``args_hash``: the loop-detection fingerprint of a route's arguments.

12 hex characters of sha256 over the arguments as canonical JSON (keys sorted, no spaces, ASCII), every string
trimmed and whitespace-collapsed first, so ``"a  b"`` and ``" a b "`` are the same call.

The policy boundary bounds arguments (:class:`~routegate.core.ArgLimits`) before they are hashed; for arguments
that reach :func:`args_hash` another way, nesting too deep for the JSON encoder (or an integer too long to
print) switches to an iterative encoding of the same text, so hashing never raises ``RecursionError``. A cycle
is still refused: ``ValueError``, as ``json.dumps`` does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def _normalize(value: object) -> object:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, Mapping):
        return {str(key): _normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalize(item) for item in value]
    return value


def canonical_args(args: Mapping[str, Any]) -> str:
    """The canonical JSON text that :func:`args_hash` digests."""
    try:
        return _CANONICAL.encode(_normalize(args))
    except (RecursionError, ValueError):
        return _canonical_iterative(args)


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return encode_basestring_ascii(" ".join(value.split()))
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int.__repr__(value)
        except ValueError:  # over sys.get_int_max_str_digits(): still a deterministic text
            return encode_basestring_ascii(hex(value))
    return _CANONICAL.encode(value)


def _first(entry: tuple[str, object]) -> str:
    return entry[0]


def _canonical_iterative(args: Mapping[str, Any]) -> str:
    """The text :data:`_CANONICAL` gives for ``_normalize(args)``, built with an explicit stack."""
    parts: list[str] = []
    stack: list[object] = [args]
    active: set[int] = set()
    while stack:
        node = stack.pop()
        if isinstance(node, _Close):
            parts.append(node.text)
            active.discard(node.ident)
            continue
        if isinstance(node, _Text):
            parts.append(node.text)
            continue
        if isinstance(node, Mapping | list | tuple):
            ident = id(node)
            if ident in active:
                raise ValueError("Circular reference detected")
            active.add(ident)
            todo: list[object] = [_Close("}" if isinstance(node, Mapping) else "]", ident)]
            if isinstance(node, Mapping):
                entries = sorted({str(key): value for key, value in node.items()}.items(), key=_first)
                for index, (key, value) in enumerate(reversed(entries)):
                    todo.append(value)
                    sep = "" if index == len(entries) - 1 else ","
                    todo.append(_Text(sep + encode_basestring_ascii(key) + ":"))
                todo.append(_Text("{"))
            else:
                for index, value in enumerate(reversed(node)):
                    todo.append(value)
                    if index != len(node) - 1:
                        todo.append(_Text(","))
                todo.append(_Text("["))
            stack.extend(todo)
            continue
        parts.append(_scalar(node))
    return "".join(parts)


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Close(_Text):
    __slots__ = ("ident",)

    def __init__(self, text: str, ident: int) -> None:
        super().__init__(text)
        self.ident = ident


def args_hash(args: Mapping[str, Any]) -> str:
    """12 hex chars of sha256 over :func:`canonical_args`."""
    return hashlib.sha256(canonical_args(args).encode()).digest()[:6].hex()  # the first 12 of its hexdigest()
