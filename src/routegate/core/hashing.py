"""``args_hash``: the loop-detection fingerprint of a route's arguments (seed semantics).

12 hex characters of sha256 over the arguments as canonical JSON (keys sorted, no spaces, ASCII), every string
trimmed and whitespace-collapsed first, so ``"a  b"`` and ``" a b "`` are the same call.
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
    if all(type(key) is str and type(value) is str for key, value in args.items()):
        # the common shape (string arguments), encoded exactly as the general path below would, minus its overhead
        return (
            "{"
            + ",".join(
                encode_basestring_ascii(key) + ":" + encode_basestring_ascii(" ".join(value.split()))
                for key, value in sorted(args.items())
            )
            + "}"
        )
    return _CANONICAL.encode(_normalize(args))


def args_hash(args: Mapping[str, Any]) -> str:
    """12 hex chars of sha256 over :func:`canonical_args`."""
    return hashlib.sha256(canonical_args(args).encode()).hexdigest()[:12]
