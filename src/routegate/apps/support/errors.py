"""Errors of the support desk. A tool error never ends a turn: the graph falls back to the Respond node."""

from __future__ import annotations

from routegate.errors import RoutegateError, RuntimeFaultError


class ToolError(RuntimeFaultError):
    """A tool failed while running (database error, timeout). ``code`` is a short machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TurnFailedError(RuntimeFaultError):
    """``ask``: the turn ended with an ``error`` event instead of a result; ``code`` is the event's code
    (``database_unavailable``, ``internal_error``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class InvalidSessionIdError(RoutegateError, ValueError):
    """A session id was refused (it comes from the client: bad input, not a fault). ``code`` is
    ``bad_session_id``, the code of the ``error`` event a turn on it streams."""

    code = "bad_session_id"
