"""The CLI side of the one message rule (:mod:`routegate.core.messages`): every command that takes a user
message (``ask``, ``chat``, ``route``, ``triage``) checks it here, with the limit from the settings, before any
model, database or encoder is started."""

from __future__ import annotations

from routegate.settings import Settings


def checked(text: object, settings: Settings, *, from_bytes: bool = True) -> str:
    """``text`` if it is a valid message, else :class:`~routegate.core.messages.InvalidMessageError`.

    Command-line arguments and standard input that are not UTF-8 reach Python as lone surrogates
    (``surrogateescape``): they are refused here with the byte and its position, as the HTTP API refuses lone
    surrogates. ``from_bytes=False`` for text decoded from JSON (a ``--file`` line), where a lone surrogate was
    written as such.
    """
    from routegate.core.messages import check_message  # the core package: imported when a command runs

    return check_message(text, max_chars=settings.max_message_chars, from_bytes=from_bytes)
