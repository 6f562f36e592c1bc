"""Misroutes as training data: when a worker answers ``needs_reroute``, the request was routed wrongly.

:class:`MisrouteLog` appends one JSON line per misroute (``text``, the wrong route, the route that finally
handled it — the label — and the worker's reason). :meth:`MisrouteLog.examples` returns the labelled ones as
:class:`~routegate.routers.data.LabelledExample`, ready to be added to the training data of the next ``fit``.
User text is written to the file: keep the log where user data may be kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from routegate.core.result import AgentResult
from routegate.errors import ConfigurationError
from routegate.routers.data import LabelledExample


@dataclass(frozen=True, slots=True)
class Misroute:
    text: str
    wrong_route: str
    label: str | None
    reason: str = ""


def misroutes_of(result: AgentResult) -> list[Misroute]:
    """The misroutes of a finished run: every ``needs_reroute`` attempt, labelled with the route that then
    completed (``None`` when the run never completed)."""
    final = result.selected_route if result.ok else None
    out: list[Misroute] = []
    for entry in result.history:
        if entry.status == "needs_reroute":
            reason = entry.observation.get("reason") or entry.observation.get("error") or ""
            out.append(Misroute(result.goal, entry.route.target, final, str(reason)))
    return out


class MisrouteLog:
    """An append-only JSONL log of misroutes (thread-safe within a process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, misroutes: Iterable[Misroute]) -> int:
        lines = [json.dumps(asdict(m), ensure_ascii=False) + "\n" for m in misroutes]
        if lines:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.writelines(lines)
        return len(lines)

    def record_run(self, result: AgentResult) -> int:
        """Log the misroutes of one run; returns how many were logged."""
        return self.record(misroutes_of(result))

    def read(self) -> list[Misroute]:
        if not self.path.exists():
            return []
        out: list[Misroute] = []
        with self.path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    obj: Any = json.loads(line)
                    out.append(
                        Misroute(
                            str(obj["text"]), str(obj["wrong_route"]), obj.get("label"), str(obj.get("reason", ""))
                        )
                    )
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ConfigurationError(f"{self.path}:{number}: not a misroute record ({exc!r})") from exc
        return out

    def examples(self) -> list[LabelledExample]:
        """The misroutes whose correct route is known, as training examples (duplicates removed)."""
        seen: dict[tuple[str, str], None] = {}
        for m in self.read():
            if isinstance(m.label, str) and m.label:
                seen.setdefault((m.text, m.label), None)
        return [LabelledExample(text, label) for text, label in seen]
