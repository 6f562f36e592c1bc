"""Signed checkpoints: an HMAC-SHA256 over a checkpoint's canonical bytes, so a writer without the key cannot
forge one (an interrupt's answer, a route, a position).

The MAC covers the run's key, its status and stop reason, and the whole document but its ``"sig"`` field. A
signature this release writes (``"c1:<hex>"``) covers the document's path — its ``envelopes`` and ``decisions``
lists — through a hash chain of their items (:class:`Chain`: the digest of each item's canonical bytes after the
digest of the items before it), so a run signs each checkpoint in the time of what changed since the one before,
not of its whole path; a checkpoint is checked by computing the chains of its lists again. A signature without the
prefix (written before) covers the canonical bytes of the whole document and is checked as such; the bytes the two
MACs cover start differently (a tag, a ``{``), so neither signature can stand for the other. The canonical bytes are the same whichever backend stored the document: compact JSON with sorted keys and ASCII
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
    """The bytes a checkpoint's signature without a prefix (written before chained signatures) covers."""
    doc = {k: v for k, v in state.items() if k != SIG}
    return canonical_json({"key": key, "status": status, "stop_reason": stop_reason, "state": doc}).encode()


CHAINED = "c1:"
"""The prefix of a chained signature (:func:`sign`)."""
_CHAINED_TAG = b"routegate.plan.checkpoint.chained-v1\n"
_CHAIN_START = hashlib.sha256(b"routegate.plan.chain").digest()
PATH_FIELDS = ("envelopes", "decisions")


class Chain:
    """The running digest of a list's items: ``digest = sha256(digest + canonical bytes of the item)`` for each item
    in turn (the digest is 32 bytes, so an item's bytes can never be taken for another's), and how many there are.
    A run extends it with the items its path gained since the checkpoint before."""

    __slots__ = ("count", "digest")

    def __init__(self, items: list[Any] | None = None) -> None:
        self.count = 0
        self.digest = _CHAIN_START
        if items:
            self.extend(items)

    def extend(self, items: list[Any]) -> None:
        digest, sha256 = self.digest, hashlib.sha256
        for item in items:
            digest = sha256(digest + canonical_json(item).encode()).digest()
        self.digest = digest
        self.count += len(items)

    def value(self) -> list[Any]:
        return [self.count, self.digest.hex()]


Chains = dict[str, Chain | None]
"""The chains of a checkpoint's ``envelopes`` and ``decisions`` (``None``: the field is not a list)."""


def chains_of(state: Mapping[str, Any]) -> Chains:
    """The chains of ``state``'s path lists, computed from scratch."""
    return {name: Chain(value) if isinstance(value := state.get(name), list) else None for name in PATH_FIELDS}


def canonical_chained(key: str, status: str, stop_reason: str, state: Mapping[str, Any], chains: Chains) -> bytes:
    """The bytes a chained signature covers: the document but its signature and path, and the path's chains."""
    doc = {k: v for k, v in state.items() if k != SIG and k not in PATH_FIELDS}
    path = {name: None if chain is None else chain.value() for name, chain in chains.items()}
    signed = {"key": key, "status": status, "stop_reason": stop_reason, "state": doc, "path": path}
    return _CHAINED_TAG + canonical_json(signed).encode()


def sign(
    secret: bytes, key: str, status: str, stop_reason: str, state: dict[str, Any], chains: Chains | None = None
) -> None:
    """Put the chained signature of ``state`` (as stored under ``key`` with this status) in its ``"sig"`` field.
    ``chains``: those of ``state``'s lists as they are now, kept by a writer that extends them as its path grows
    (else computed here)."""
    signed = canonical_chained(key, status, stop_reason, state, chains_of(state) if chains is None else chains)
    state[SIG] = CHAINED + hmac.new(secret, signed, hashlib.sha256).hexdigest()


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
        if given.startswith(CHAINED):
            signed = canonical_chained(record.key, record.status, record.stop_reason, state, chains_of(state))
            expected = CHAINED + hmac.new(secret, signed, hashlib.sha256).hexdigest()
        else:
            signed = canonical(record.key, record.status, record.stop_reason, state)
            expected = hmac.new(secret, signed, hashlib.sha256).hexdigest()
    except (TypeError, ValueError):  # not JSON (a document that loaded is; a hand-built one may not be)
        expected = ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise CheckpointMismatchError(
            f"the signature of the checkpoint of {record.key!r} does not match its content: it was changed by a "
            "writer without the signing key (or signed with another key); it is not resumed: start over with "
            "resume=False or another checkpoint_key"
        )


__all__ = [
    "CHAINED",
    "MIN_KEY_BYTES",
    "Chain",
    "Chains",
    "canonical",
    "canonical_chained",
    "canonical_json",
    "chains_of",
    "sign",
    "signing_key",
    "verify",
]
