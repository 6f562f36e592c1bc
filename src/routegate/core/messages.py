"""The one definition of a valid user message, shared by the CLI, the Python API and the HTTP server.

A message is valid when it is a ``str`` that

* is not blank (only whitespace counts as blank);
* holds no NUL character (PostgreSQL ``text`` cannot store one);
* holds no lone surrogate: what a byte that is not UTF-8 becomes when Python decodes command-line arguments or
  standard input with ``surrogateescape`` (``b"\\xff"`` -> ``"\\udcff"``, reported as that byte when
  ``from_bytes=True``), and what ``"\\ud800"`` in JSON decodes to. Such text cannot be encoded back to UTF-8, so it
  would fail deep inside the tokenizer or the database driver;
* has at most ``max_chars`` characters (``ROUTEGATE_MAX_MESSAGE_CHARS``, default :data:`DEFAULT_MAX_MESSAGE_CHARS`;
  :data:`MAX_REQUEST_CHARS` where a runtime takes a request with no setting: a routing agent's goal, a task
  delegated to another agent).

:func:`check_message` returns the text unchanged or raises :class:`InvalidMessageError`, whose ``code`` is one of
:data:`MessageProblem` and whose message names the problem with its position or limit, and what to do.
Positions are 0-based character offsets into the string (not byte offsets).
"""

from __future__ import annotations

import re
from typing import Final, Literal

from routegate.errors import RoutegateError, RunStopError

DEFAULT_MAX_MESSAGE_CHARS: Final = 4_000
"""The default bound on a message's length in characters (``ROUTEGATE_MAX_MESSAGE_CHARS``)."""

MAX_REQUEST_CHARS: Final = 32_000
"""The bound on a request's length in characters where no setting gives one: the goal of a
:class:`~routegate.plan.RoutingAgent` run (longer: ``invalid_goal:too_long``) and the task description of an A2A
delegation, which becomes the receiving agent's goal."""

MessageProblem = Literal["not_text", "empty_message", "message_too_long", "invalid_text"]

_BAD: Final = re.compile("[\x00\ud800-\udfff]")
_ESCAPED_BYTES: Final = range(0xDC80, 0xDD00)  # surrogateescape maps the undecodable byte 0xXY to U+DCXY


class InvalidMessageError(RoutegateError, ValueError):
    """A user message was refused: ``code`` says why, ``offset`` where (for ``invalid_text``), ``limit`` the bound
    (for ``message_too_long``)."""

    def __init__(
        self, code: MessageProblem, message: str, *, offset: int | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.code: MessageProblem = code
        self.offset = offset
        self.limit = limit


def text_problem(text: str, *, from_bytes: bool = False) -> tuple[int, str] | None:
    """The offset and description of the first NUL or lone surrogate in ``text``; ``None`` when there is none.

    ``from_bytes``: ``text`` was decoded from bytes with ``surrogateescape`` (command-line arguments, standard
    input), so a surrogate U+DC80-U+DCFF is described as the byte that was not UTF-8.
    """
    found = _BAD.search(text)
    if found is None:
        return None
    at = found.start()
    point = ord(found.group())
    if point == 0:
        return at, f"contains a NUL character at position {at}; send text without NUL characters"
    if from_bytes and point in _ESCAPED_BYTES:
        return at, (
            f"contains a byte that is not valid UTF-8 (0x{point - 0xDC00:02X}) at position {at}; "
            "send UTF-8 text (check the terminal's or the file's encoding)"
        )
    return at, f"contains a lone surrogate (U+{point:04X}) at position {at}; send valid Unicode text"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_message(text: object, *, max_chars: int = DEFAULT_MAX_MESSAGE_CHARS, from_bytes: bool = False) -> str:
    """``text`` unchanged if it is a valid message (see the module doc), else :class:`InvalidMessageError`.

    ``max_chars`` is the length bound in characters (``>= 1``). ``from_bytes``: see :func:`text_problem` (the
    CLI sets it; text from JSON leaves it off). The checks run in this order: type, length (so a huge input is
    refused before it is scanned), blank, NUL / lone surrogate.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    if not isinstance(text, str):
        raise InvalidMessageError("not_text", f"the message must be text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise InvalidMessageError(
            "message_too_long",
            f"the message has {len(text)} characters, over the {max_chars} limit; send a shorter message "
            "(the limit is ROUTEGATE_MAX_MESSAGE_CHARS)",
            limit=max_chars,
        )
    if not text or text.isspace():
        raise InvalidMessageError("empty_message", "the message is empty: send a non-blank text")
    # fast path (C speed): text without NUL that encodes as UTF-8 holds no lone surrogate
    if "\x00" in text or not (text.isascii() or _encodes(text)):
        problem = text_problem(text, from_bytes=from_bytes)
        if problem is not None:
            at, description = problem
            raise InvalidMessageError("invalid_text", f"the message {description}", offset=at)
    return text


__all__ = [
    "DEFAULT_MAX_MESSAGE_CHARS",
    "MAX_REQUEST_CHARS",
    "InvalidMessageError",
    "MessageProblem",
    "check_message",
    "text_problem",
]


def goal_refusal(goal: object, max_chars: int = MAX_REQUEST_CHARS) -> RunStopError | None:
    """How a run whose goal the one message rule refuses ends — ``invalid_goal:empty`` / ``too_long`` /
    ``invalid_text`` (phase ``route``), as the routing agent and the tool agent report it —, or ``None`` when
    ``goal`` is a valid message."""
    try:
        check_message(goal, max_chars=max_chars)
    except InvalidMessageError as refused:
        return _goal_stop(goal, refused, max_chars)
    return None


def _goal_stop(goal: object, refused: InvalidMessageError, max_chars: int) -> RunStopError:
    if refused.code == "message_too_long":
        assert isinstance(goal, str)
        message = f"the request has {len(goal)} characters, over {max_chars}"
        return RunStopError("invalid_goal:too_long", message, phase="route")
    if refused.code == "invalid_text":
        assert isinstance(goal, str)
        problem = text_problem(goal)
        assert problem is not None
        return RunStopError("invalid_goal:invalid_text", f"the request {problem[1]}", phase="route")
    return RunStopError("invalid_goal:empty", "the request is empty: send a non-blank text", phase="route")
