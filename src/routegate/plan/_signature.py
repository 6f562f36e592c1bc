"""Signed checkpoints: an HMAC-SHA256 over a checkpoint's canonical bytes, so a writer without the key cannot
forge one (an interrupt's answer, a route, a position).

The MAC covers the run's key, its status and stop reason, and the whole document but its ``"sig"`` field. The
canonical bytes are the same whichever backend stored the document: compact JSON with sorted keys and ASCII
escapes, every number written in one form for its exact decimal value (an integral one as its integer digits,
any other as ``<digits>e-<n>``), because PostgreSQL's ``jsonb`` reorders keys and rewrites ``1e+16`` as
``10000000000000000``. Numerically equal numbers (``1`` and ``1.0``) share bytes; different values never do.
"""

from __future__ import annotations

import decimal
import functools
import hashlib
import hmac
import json
import re
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


_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')  # a JSON string (ASCII, escapes included), kept by split
# a number token with a fraction or an exponent (outside strings); integer tokens are canonical already
_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)")


@functools.lru_cache(maxsize=4096)
def _float_text(token: str) -> str:
    """An integral value as its integer digits (``1e+16`` and ``10000000000000000`` alike), any other as
    ``<digits>e-<n>`` without trailing zeros."""
    value = decimal.Decimal(token)
    if value == value.to_integral_value():
        return str(int(value))
    negative, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0")
    stripped = text.rstrip("0")
    return f"{'-' if negative else ''}{stripped}e{exponent + len(text) - len(stripped)}"


def _number(match: re.Match[str]) -> str:
    return _float_text(match.group())


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: the same whichever backend stored it (see the module docstring)."""
    parts = _STRING.split(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True))
    # the even parts lie outside strings (structure and numbers) and hold no quote: rewrite them in one pass
    parts[::2] = _FLOAT.sub(_number, '"'.join(parts[::2])).split('"')
    return "".join(parts)


def canonical(key: str, status: str, stop_reason: str, state: Mapping[str, Any]) -> bytes:
    """The bytes a checkpoint's signature covers."""
    doc = {k: v for k, v in state.items() if k != SIG}
    return canonical_json({"key": key, "status": status, "stop_reason": stop_reason, "state": doc}).encode()


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
    except (TypeError, ValueError):  # not JSON (a document that loaded is; a hand-built one may not be)
        expected = ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise CheckpointMismatchError(
            f"the signature of the checkpoint of {record.key!r} does not match its content: it was changed by a "
            "writer without the signing key (or signed with another key); it is not resumed: start over with "
            "resume=False or another checkpoint_key"
        )


__all__ = ["MIN_KEY_BYTES", "canonical", "canonical_json", "sign", "signing_key", "verify"]
