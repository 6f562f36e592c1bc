"""Structured server logs: one JSON object per line, with the trace and span ids of the request being served.

Off by default (uvicorn's human-readable lines); ``ROUTEGATE_LOG_FORMAT=json`` turns it on for every logger of the
process — uvicorn's own, its access log, and routegate's.
"""

from __future__ import annotations

import copy
import json
import logging
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from routegate._extras import needs

with needs("server"):
    from uvicorn.config import LOGGING_CONFIG

from routegate.settings import Settings


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "trace_id"?, "span_id"?, "exception"?}`` per record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            out["trace_id"] = format(context.trace_id, "032x")
            out["span_id"] = format(context.span_id, "016x")
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def log_config(settings: Settings) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for the configured format (``None``: keep uvicorn's default)."""
    if settings.log_format != "json":
        return None
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"] = {"json": {"()": f"{__name__}.JsonFormatter"}}
    for handler in config["handlers"].values():
        handler["formatter"] = "json"
    config["root"] = {"handlers": ["default"], "level": "INFO"}
    return config
