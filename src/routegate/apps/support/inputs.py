"""What the desk accepts from a client before a turn starts (a session id and a message), and what ``ask`` makes of
a turn's events.

Both desks (the real one and :mod:`.fake`) check a turn's input here, through the doors they share
(:mod:`.doors`), so they refuse the same input with the same ``error`` event.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from routegate.apps.support.contracts import SupportEvent, TurnError, TurnResult
from routegate.apps.support.errors import InvalidSessionIdError, TurnFailedError
from routegate.core.events import FinalEvent
from routegate.core.messages import InvalidMessageError, check_message

# 160, not 128: the HTTP server stores a client's session id (up to 128 characters) behind its API key's owner id
# (``<16 hex>:<session id>``, see routegate.server._auth)
_SESSION_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,160}\Z")


def check_session_id(session_id: object) -> str:
    """Session ids are 1-160 characters of letters, digits and ``._:@-``; raises :class:`InvalidSessionIdError`."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise InvalidSessionIdError(
            f"session_id must be 1-160 characters of letters, digits and ._:@- ; got {str(session_id)[:60]!r}"
        )
    return session_id


def check_input(message: object, session_id: object, max_chars: int) -> None:
    """Raise what a refused message (:class:`InvalidMessageError`) or session id (:class:`InvalidSessionIdError`)
    raises; the checks of :func:`turn_refusal` as exceptions, for ``ask``."""
    check_message(message, max_chars=max_chars)
    check_session_id(session_id)


async def turn_result(events: AsyncIterator[SupportEvent]) -> TurnResult:
    """A turn's result from its events (``ask``); :class:`TurnFailedError` when it ends with an ``error`` event."""
    async for event in events:
        if isinstance(event, FinalEvent):
            return event.result
        if isinstance(event, TurnError):
            raise TurnFailedError(event.code, event.message)
    raise TurnFailedError("internal_error", "the turn ended without a result")  # pragma: no cover


def turn_refusal(message: object, session_id: object, max_chars: int) -> TurnError | None:
    """The ``error`` event a turn on this input ends with at once, or ``None`` when the input is acceptable."""
    try:
        check_session_id(session_id)
    except InvalidSessionIdError as exc:
        return TurnError(message=str(exc), code=exc.code)
    try:
        check_message(message, max_chars=max_chars)
    except InvalidMessageError as exc:
        code = "empty_message" if exc.code == "not_text" else exc.code
        return TurnError(message=str(exc), code=code)
    return None
