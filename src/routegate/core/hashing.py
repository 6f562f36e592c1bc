"""``args_hash``: the loop-detection fingerprint of a route's arguments (seed semantics)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def _normalize(value: object) -> object:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, Mapping):
        return {str(key): _normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_normalize(item) for item in value]
    return value


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def args_hash(args: Mapping[str, Any]) -> str:
    """12 hex chars of sha256 over the args as canonical JSON, strings trimmed and whitespace-collapsed."""
    return hashlib.sha256(_CANONICAL.encode(_normalize(args)).encode()).hexdigest()[:12]
