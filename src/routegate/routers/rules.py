"""A deterministic keyword router: the offline, explainable first stage of routing.

Each route lists signal words or phrases (matched case-insensitively on word boundaries). The route with the
most distinct hits wins; ties go to the route declared first (declaration order is priority order). Targets
the runtime forbids after a ``needs_reroute`` are skipped, so a reroute picks the next best route.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.errors import ConfigurationError, RunStopError

ArgsBuilder = Callable[[RouteRequest], Mapping[str, Any]]
NO_ROUTE = "no_route"


def ticket_args(request: RouteRequest) -> Mapping[str, Any]:
    """The routing agent's argument shape: the whole request as ``ticket``."""
    return {"ticket": request.goal}


class KeywordRouter:
    """Routes on signal words. ``default`` (if given) is chosen when nothing matches."""

    def __init__(
        self,
        rules: Mapping[str, Sequence[str]],
        *,
        default: str | None = None,
        args: ArgsBuilder = ticket_args,
        name: str = "rules",
    ) -> None:
        if not rules:
            raise ConfigurationError("KeywordRouter needs at least one route with signal words")
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        for target, words in rules.items():
            cleaned = [w.strip().lower() for w in words if w.strip()]
            if not cleaned:
                raise ConfigurationError(f"KeywordRouter: route {target!r} has no signal words")
            alternation = "|".join(re.escape(w) for w in sorted(cleaned, key=len, reverse=True))
            self._patterns.append((target, re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE)))
        self._default = default
        self._args = args
        self.name = name

    def score(self, text: str) -> dict[str, float]:
        """Distinct signal words found per route (declaration order kept)."""
        return {target: float(len({m.lower() for m in pattern.findall(text)})) for target, pattern in self._patterns}

    async def decide(self, request: RouteRequest) -> RouteDecision:
        scores = self.score(request.goal)
        allowed = {spec.name for spec in request.catalog} - request.forbidden_targets
        best: str | None = None
        best_score = 0.0
        for target, value in scores.items():
            if target in allowed and value > best_score:
                best, best_score = target, value
        why = f"{best_score:g} signal word(s) for {best}" if best else "no signal word matched"
        if best is None:
            if self._default is None or self._default in request.forbidden_targets:
                raise RunStopError(f"{NO_ROUTE}:no_rule_matched", "no route's signal words match the request")
            best, why = self._default, f"no signal word matched; default route {self._default}"
        return RouteDecision.proposed(best, dict(self._args(request)), decided_by=self.name, scores=scores, why=why)
