"""The CLI's one error rule: an expected failure is one line ``error: <what>; <what to do>`` on stderr.

:func:`describe` turns an exception that escaped a command into that line; :func:`exit_code` picks the status
(2 for bad input or configuration, 1 for a failure while running). The traceback is shown only with ``--debug``
or ``ROUTEGATE_DEBUG=1`` (:func:`debug_from_env`); :func:`configure_logging` keeps log records to one line
without their traceback too (and drops other libraries' warnings, such as a connection pool's retries) unless
debugging.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final, TextIO

from pydantic import ValidationError

from routegate.errors import ConfigurationError, RoutegateError

_MAX_LINE: Final = 600
_DEBUG_HINT: Final = "rerun with --debug (or ROUTEGATE_DEBUG=1) to see the traceback"
_TRUE: Final = frozenset({"1", "true", "yes", "on"})


def debug_from_env(environ: Mapping[str, str]) -> bool:
    """``ROUTEGATE_DEBUG`` set to 1 / true / yes / on."""
    return environ.get("ROUTEGATE_DEBUG", "").strip().lower() in _TRUE


class _OneLine(logging.Formatter):
    """``warning: <logger>: <message>`` on one line, without the exception's traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.name}: {one_line(record.getMessage())}"


def _ours_or_serious(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or record.name.split(".")[0] == "routegate"


_MARK: Final = "_routegate_cli_handler"


def configure_logging(stream: TextIO, *, debug: bool) -> None:
    """Log to ``stream``: with ``debug``, every record from DEBUG up with its traceback; otherwise routegate's
    warnings and everyone's errors, one line each. Does nothing when the root logger already has a handler (an
    application or a test harness configured logging)."""
    root = logging.getLogger()
    if root.handlers and not any(getattr(h, _MARK, False) for h in root.handlers):
        return
    for handler in [h for h in root.handlers if getattr(h, _MARK, False)]:
        root.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    setattr(handler, _MARK, True)
    if debug:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.DEBUG)
    else:
        handler.setFormatter(_OneLine())
        handler.addFilter(_ours_or_serious)
        root.setLevel(logging.WARNING)
    root.addHandler(handler)


def one_line(text: str) -> str:
    """Whitespace (newlines included) collapsed, bounded to a readable length."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_LINE else flat[: _MAX_LINE - 1] + "…"


def _variable(field: str) -> str:
    """The environment variable behind a :class:`~routegate.settings.Settings` field (or its alias)."""
    return field if field.isupper() else f"ROUTEGATE_{field.upper()}"


def _settings_error(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "settings"
        problems.append(f"{_variable(where)}: {error.get('msg', 'invalid')} (got {str(error.get('input'))[:80]!r})")
    return "invalid configuration: " + "; ".join(problems) + "; fix or unset the environment variable"


_DATABASE_HINT: Final = (
    "check that DATABASE_URL points to a running PostgreSQL with pgvector, or unset it to use the embedded server"
)


def _is_database_error(exc: BaseException) -> bool:
    return any(cls.__module__.split(".")[0] in ("psycopg", "psycopg_pool") for cls in type(exc).__mro__)


def _caused_by_database(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the cause chain, bounded
        if seen is None:
            return False
        if _is_database_error(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def describe(exc: BaseException) -> str:
    """The one line (without the ``error: `` prefix) that tells the user what failed and what to do."""
    if isinstance(exc, RoutegateError):
        text = str(exc) or type(exc).__name__
        if _caused_by_database(exc) and "DATABASE_URL" not in text:
            text = f"{text}; {_DATABASE_HINT}"
    elif isinstance(exc, ValidationError):
        text = _settings_error(exc)
    elif _is_database_error(exc):
        text = f"the database failed ({type(exc).__name__}: {exc}); {_DATABASE_HINT}"
    elif isinstance(exc, UnicodeError):
        text = f"text that is not valid UTF-8 ({exc}); use UTF-8 input"
    elif isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        text = f"{where}{exc.strerror or exc}; check the path and its permissions"
    else:
        text = f"unexpected {type(exc).__name__}: {exc}; this is a bug: {_DEBUG_HINT} and report it"
    return one_line(text)


def exit_code(exc: BaseException) -> int:
    """2 for bad input or configuration (fix the command or the environment), 1 for a failure while running."""
    return 2 if isinstance(exc, ConfigurationError | ValidationError | ValueError) else 1
