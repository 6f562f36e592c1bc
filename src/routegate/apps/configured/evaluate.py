"""How well a desk's router sends a team's labelled questions where they belong (``routegate desk eval``):
accuracy overall and per route, and every misroute with the layer that decided."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def read_labelled(path: Path) -> list[tuple[str, str]]:
    """``{"text": ..., "route": "POSTGRES" | "VECTOR" | "EXTERNAL" | "LLM"}`` per line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DeskConfigError(f"{path}: cannot read it ({exc}); give a UTF-8 JSONL file") from None
    out: list[tuple[str, str]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise DeskConfigError(f"{path}, line {number}: not JSON; write one object per line") from None
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or item.get("route") not in ROUTES:
            raise DeskConfigError(f'{path}, line {number}: needs "text" and "route" (one of {", ".join(ROUTES)})')
        out.append((item["text"], item["route"]))
    if not out:
        raise DeskConfigError(f"{path}: no labelled questions in it")
    return out


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
