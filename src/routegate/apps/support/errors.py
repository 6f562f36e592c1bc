"""Errors of the support desk's tools. A tool error never ends a turn: the graph falls back to the Respond node."""

from __future__ import annotations

from routegate.errors import RuntimeFaultError


class ToolError(RuntimeFaultError):
    """A tool failed while running (database error, timeout). ``code`` is a short machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
