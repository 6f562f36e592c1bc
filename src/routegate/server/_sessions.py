"""Which session a request addresses, and whether its caller may.

On a server with API keys a session belongs to the key whose turns created it (see :mod:`._auth`): its
messages are stored under that key's owner id. For any other key the session does not exist, and every
endpoint answers 404 ``session_not_found``:

* ``GET /sessions/{id}``: 404 unless the caller's key has messages in it;
* ``DELETE /sessions/{id}``: 404 when another key has messages in it and the caller's has none; otherwise 204
  (deleting one's own empty session is a no-op, as the UI's Reset of a fresh session expects);
* ``POST /chat`` with ``session_id``, ``POST /v1/chat/completions`` with ``user`` / ``X-Session-Id``: 404 when
  another key has messages in it and the caller's has none; otherwise the turn runs in the caller's session
  (a new id starts a new session).

The 404 is a courtesy, isolation does not depend on it: a turn always runs in the caller's own namespace.
Without keys nothing changes: one namespace, and an unknown session's history is empty (200).
"""

from __future__ import annotations

from routegate.apps.support.tenancy import ANONYMOUS
from routegate.server._auth import Caller, SessionRef
from routegate.server._errors import ApiError
from routegate.server._turns import Services, call_desk, for_tenant, new_session_id

SESSION_NOT_FOUND = "session_not_found"


def not_found(session_id: str) -> ApiError:
    return ApiError(
        404,
        SESSION_NOT_FOUND,
        f"no session {session_id!r} for this API key; omit the session id to start a new session",
    )


async def _has_messages(services: Services, internal: str, tenant: str) -> bool:
    history = services.desk.history(internal, **for_tenant(services, tenant))
    return bool(await call_desk(services, "looking up the session", history))


async def _foreign(services: Services, caller: Caller, session_id: str, tenant: str) -> bool:
    """True when another key has messages under ``session_id`` and the caller has none (read for ``tenant``)."""
    if caller.owner is None or await _has_messages(services, caller.session(session_id).internal, tenant):
        return False
    for owner in services.keys.owners:
        other = Caller(owner).session(session_id).internal
        if owner != caller.owner and await _has_messages(services, other, tenant):
            return True
    return False


async def session_for_turn(
    services: Services, caller: Caller, session_id: str | None, tenant: str = ANONYMOUS
) -> SessionRef:
    """The session a turn runs in: a new one when ``session_id`` is ``None``; 404 when it is another key's. The
    look-up is ``tenant``'s (the caller's)."""
    if session_id is None:
        return caller.session(new_session_id())
    if await _foreign(services, caller, session_id, tenant):
        raise not_found(session_id)
    return caller.session(session_id)


async def session_to_delete(services: Services, caller: Caller, session_id: str, tenant: str = ANONYMOUS) -> SessionRef:
    if await _foreign(services, caller, session_id, tenant):
        raise not_found(session_id)
    return caller.session(session_id)
