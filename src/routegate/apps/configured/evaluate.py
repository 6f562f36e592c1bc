"""How well a desk's router sends a team's labelled questions where they belong (``routegate desk eval``):
accuracy overall and per route, and every misroute with the layer that decided."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from routegate.apps.configured.config import DeskConfigError
from routegate.apps.support.contracts import ROUTES
from routegate.apps.support.router import SupportRouter


@dataclass(frozen=True, slots=True)
class Misroute:
    text: str
    expected: str
    got: str
    layer: str


@dataclass(frozen=True, slots=True)
class DeskEval:
    total: int
    correct: int
    per_route: dict[str, tuple[int, int]]  # route -> (correct, total)
    misroutes: tuple[Misroute, ...] = field(default=())

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "correct": self.correct,
            "accuracy": round(self.accuracy, 4),
            "per_route": {r: {"correct": c, "total": t} for r, (c, t) in self.per_route.items()},
            "misroutes": [_misroute(m) for m in self.misroutes],
        }

    def lines(self) -> list[str]:
        out = [f"accuracy {self.accuracy:.1%} ({self.correct}/{self.total})"]
        out += [f"  {r}: {c}/{t}" for r, (c, t) in self.per_route.items()]
        out += [f"misrouted: {m.text!r}: {m.expected} -> {m.got} ({m.layer})" for m in self.misroutes]
        return out


def _misroute(m: Misroute) -> dict[str, str]:
    return {"text": m.text, "expected": m.expected, "got": m.got, "layer": m.layer}


LABELLED_FORMAT: Final = (
    'one JSON object per line: {"text": "<a question>", "route": "POSTGRES" | "VECTOR" | "EXTERNAL" | "LLM"} '
    "(other keys are ignored; blank lines are skipped)"
)


def read_labelled(path: Path) -> list[tuple[str, str]]:
    """The labelled questions of ``path`` (:data:`LABELLED_FORMAT`); a :class:`DeskConfigError` names the file, the
    line and the field that is wrong."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DeskConfigError(f"{path} does not exist; give a JSONL file of labelled questions") from None
    except IsADirectoryError:
        raise DeskConfigError(f"{path} is a directory; give a JSONL file of labelled questions") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DeskConfigError(f"{path}: cannot read it ({exc}); give a UTF-8 JSONL file") from None
    out: list[tuple[str, str]] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            out.append(_labelled(line, f"{path}, line {number}"))
    if not out:
        raise DeskConfigError(f"{path}: no labelled questions in it; write {LABELLED_FORMAT}")
    return out


def _labelled(line: str, where: str) -> tuple[str, str]:
    try:
        item = json.loads(line)
    except ValueError:
        raise DeskConfigError(f"{where}: not JSON; write {LABELLED_FORMAT}") from None
    if not isinstance(item, dict):
        raise DeskConfigError(f"{where}: a JSON {type(item).__name__}, not an object; write {LABELLED_FORMAT}")
    text, route = item.get("text"), item.get("route")
    if not isinstance(text, str) or not text.strip():
        got = "missing" if "text" not in item else f"got {json.dumps(text, ensure_ascii=False)}"
        raise DeskConfigError(f'{where}: needs "text", the question as a non-empty string ({got})')
    if route not in ROUTES:
        got = "missing" if "route" not in item else f"got {json.dumps(route, ensure_ascii=False)}"
        raise DeskConfigError(f'{where}: needs "route" to be one of {", ".join(ROUTES)} ({got})')
    return text, str(route)


async def evaluate(router: SupportRouter, labelled: Sequence[tuple[str, str]]) -> DeskEval:
    per_route: dict[str, list[int]] = {}
    misroutes: list[Misroute] = []
    for text, expected in labelled:
        choice = await router.route_choice(text)
        counts = per_route.setdefault(expected, [0, 0])
        counts[1] += 1
        if choice.route == expected:
            counts[0] += 1
        else:
            misroutes.append(Misroute(text, expected, choice.route, choice.layer))
    correct = sum(c for c, _ in per_route.values())
    return DeskEval(
        total=len(labelled),
        correct=correct,
        per_route={r: (c, t) for r, (c, t) in per_route.items()},
        misroutes=tuple(misroutes),
    )
