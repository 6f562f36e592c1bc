"""What ``routegate plans history`` prints, and the payload file ``plans resume --at N --payload FILE`` reads: the
parts of the history commands (:mod:`routegate.cli.plans`) that are not its shared store and output helpers.

What the store holds is untrusted: every string from it goes through the ``cell`` escaper the command passes in.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate.errors import ConfigurationError

if TYPE_CHECKING:  # the command line imports the engine only when a command runs
    from routegate.plan.history import RunHistory

PREVIEW_CHARS = 32
HEADER = f"{'AT':>5} {'STEP':<16} {'WRITTEN':<20} {'ROUTE / STOP':<34} {'SIZE':>7} {'PAYLOAD':<34} {'IN':<12} OUT"


def history_table(key: str, history: RunHistory, cell: Callable[[object], str]) -> list[str]:
    """The lines of the history table: a title (the run, its parent), the header, a line per checkpoint."""
    parent = history.parent
    origin = "" if parent is None else f" (forked from {cell(parent.key)} at checkpoint {parent.at})"
    lines = [f"run {cell(key)}{origin}: {len(history)} checkpoints"]
    if not len(history):
        lines.append("no history kept: the store keeps none (Store(history=False)), or the run predates it")
        return lines
    lines.append(HEADER)
    for c in history:
        if c.problem is not None:
            lines.append(f"{c.at:>5} damaged: {cell(c.problem)}")
            continue
        preview = _fit(cell(json.dumps(c.payload, ensure_ascii=False, default=str)), PREVIEW_CHARS)
        lines.append(
            f"{c.at:>5} {_fit(cell(c.step), 16):<16} {_when(c.written):<20} {_fit(cell(c.route), 34):<34} "
            f"{c.size:>7} {preview:<34} {c.input_hash or '-':<12} {c.output_hash or '-'}"
        )
    return lines


def history_rows(history: RunHistory) -> list[dict[str, Any]]:
    """The history as JSON objects, one per checkpoint (a damaged one: its number and its problem)."""
    rows: list[dict[str, Any]] = []
    for c in history:
        if c.problem is not None:
            rows.append({"at": c.at, "problem": c.problem})
            continue
        rows.append(
            {
                "at": c.at,
                "written": _when(c.written),
                "status": c.status,
                "stop_reason": c.stop_reason or None,
                "step": c.step,
                "iterations": c.iterations,
                "route": c.route,
                "size": c.size,
                "payload": c.payload,
                "input_hash": c.input_hash,
                "output_hash": c.output_hash,
            }
        )
    return rows


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def read_payload(name: str, shown: str) -> Any:
    """The JSON in the file ``name`` (``-``: standard input); ``shown`` is its name as printed."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--payload {shown}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f'--payload {shown} is not JSON ({exc}); write the payload as JSON, e.g. {{"n": 2}}'
        ) from None
