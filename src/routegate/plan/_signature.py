"""Signed checkpoints: an HMAC-SHA256 over a checkpoint's canonical bytes, so a writer without the key cannot
forge one (an interrupt's answer, a route, a position).

The MAC covers the run's key, its status and stop reason, and the whole document but its ``"sig"`` field. The
canonical bytes are the same whichever backend stored the document: keys sorted, and every number written as
its exact decimal value (PostgreSQL's ``jsonb`` reorders keys and rewrites ``1e+16`` as ``10000000000000000``).
Numbers and lists are tagged (``["n", ...]``, ``["l", ...]``) so that no two different documents share bytes.
"""

from __future__ import annotations

import decimal
import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from typing import Any

from routegate.errors import ConfigurationError
from routegate.plan.checkpoint import RunRecord
from routegate.plan.errors import CheckpointMismatchError

MIN_KEY_BYTES = 16
SIG = "sig"


def signing_key(value: str | bytes | None) -> bytes | None:
    """``Store(signing_key=...)`` as bytes (text is UTF-8), refusing keys too short to resist guessing."""
    if value is None:
        return None
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if len(raw) < MIN_KEY_BYTES:
        raise ConfigurationError(
            f"signing_key must be at least {MIN_KEY_BYTES} bytes, got {len(raw)}; generate one with "
            "`python -c 'import secrets; print(secrets.token_hex(32))'`"
        )
    return raw


def _number(value: int | float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    sign, digits, exponent = decimal.Decimal(repr(value) if isinstance(value, float) else value).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0")
    if not text:
        return "0"
    stripped = text.rstrip("0")
    return f"{'-' if sign else ''}{stripped}e{exponent + len(text) - len(stripped)}"


def _canonical(value: Any) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return ["n", _number(value)]
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else json.dumps(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return ["l", *map(_canonical, value)]
    raise TypeError(f"a checkpoint holds only JSON values, not {type(value).__name__}")


def canonical(key: str, status: str, stop_reason: str, state: Mapping[str, Any]) -> bytes:
    """The bytes a checkpoint's signature covers."""
    doc = {k: v for k, v in state.items() if k != SIG}
    body = {"key": key, "status": status, "stop_reason": stop_reason, "state": _canonical(doc)}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(secret: bytes, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None:
    """Put the signature of ``state`` (as stored under ``key`` with this status) in its ``"sig"`` field."""
    state[SIG] = hmac.new(secret, canonical(key, status, stop_reason, state), hashlib.sha256).hexdigest()


def verify(secret: bytes, record: RunRecord) -> None:
    """Refuse a record that is unsigned or whose signature does not match (:class:`CheckpointMismatchError`)."""
    state = record.state
    given = state.get(SIG)
    if not isinstance(given, str):
        raise CheckpointMismatchError(
            f"the checkpoint of {record.key!r} (format {state.get('format')!r}) is not signed, and this store "
            "checks signatures (signing_key is set): it was written before signing was switched on, or by a "
            "writer without the key; it is not resumed: start over with resume=False or another checkpoint_key"
        )
    try:
        expected = hmac.new(
            secret, canonical(record.key, record.status, record.stop_reason, state), hashlib.sha256
        ).hexdigest()
    except (TypeError, RecursionError):
        expected = ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise CheckpointMismatchError(
            f"the signature of the checkpoint of {record.key!r} does not match its content: it was changed by a "
            "writer without the signing key (or signed with another key); it is not resumed: start over with "
            "resume=False or another checkpoint_key"
        )


__all__ = ["MIN_KEY_BYTES", "canonical", "sign", "signing_key", "verify"]
