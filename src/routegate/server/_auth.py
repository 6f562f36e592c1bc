"""API keys and the sessions they own.

Each configured key is a tenant. The desk never sees the session id a client sends: it sees
``<owner>:<session id>``, where ``<owner>`` is a short keyed hash of the key (:func:`owner_of`). Two keys that
send the same session id therefore address two different conversations, so one key's turns can never land in
another key's history, whatever the client sends. Without keys (the local default) the id is used as it is.

Keys are compared in constant time (``hmac.compare_digest`` on SHA-256 digests, against every key, without
stopping at the first match) and are never logged; only the owner hash reaches the database.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

_OWNER_LABEL = b"routegate session owner v1"
OWNER_CHARS = 16


def owner_of(key: str) -> str:
    """The tenant id of ``key`` as stored in the database: 16 hex characters of HMAC-SHA256 (not reversible)."""
    return hmac.new(_OWNER_LABEL, key.encode("utf-8"), hashlib.sha256).hexdigest()[:OWNER_CHARS]


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A session as the client names it (``public``) and as the desk stores it (``internal``)."""

    public: str
    internal: str


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent the request: ``owner`` is the key's tenant id, ``None`` on a server without keys."""

    owner: str | None = None

    def session(self, session_id: str) -> SessionRef:
        internal = session_id if self.owner is None else f"{self.owner}:{session_id}"
        return SessionRef(public=session_id, internal=internal)


ANONYMOUS = Caller()


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who a turn counts against for the fair-sharing limits (:mod:`._fairness`): the caller's API key, or on a
    server without keys the client's address (each address is a tenant of its own). ``who`` names it in errors."""

    id: str
    who: str


def tenant_of(caller: Caller, client_host: str | None) -> Tenant:
    if caller.owner is not None:
        return Tenant(id=f"key:{caller.owner}", who="this API key")
    return Tenant(id=f"address:{client_host or 'unknown'}", who="this client address")


class KeyRing:
    """The keys the server accepts, kept as SHA-256 digests (fixed length: the comparison time does not depend
    on the length of the key sent) next to their owner ids."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._entries = tuple((_digest(k), owner_of(k)) for k in keys)
        self.owners = tuple(owner for _, owner in self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def identify(self, presented: str) -> Caller | None:
        """The caller whose key is ``presented``, or ``None``. Every key is compared, whatever matches."""
        digest = _digest(presented)
        found: str | None = None
        for expected, owner in self._entries:
            if hmac.compare_digest(digest, expected):
                found = owner
        return None if found is None else Caller(owner=found)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
