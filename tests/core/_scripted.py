"""Small scripted routers/finalizers for the core tests (the shipped ones live in routegate.testing)."""

from __future__ import annotations

from collections.abc import Sequence

from routegate.core import FinalizeRequest, RouteDecision, RouteRequest


class ListRouter:
    """Answers the scripted raw outputs in order and records the requests it saw."""

    def __init__(self, outputs: Sequence[object]) -> None:
        self.outputs = list(outputs)
        self.requests: list[RouteRequest] = []

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.requests.append(request)
        if not self.outputs:
            raise AssertionError("ListRouter: more route decisions asked for than scripted")
        return RouteDecision(raw=self.outputs.pop(0), decided_by="script")


class FixedFinalizer:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def finalize(self, request: FinalizeRequest) -> str:
        return self.answer  # type: ignore[return-value]  # deliberately untyped output in some tests


def route(target: str, ticket: object = "refund for user_id=42, charged twice", **extra: object) -> dict[str, object]:
    args: dict[str, object] = {"ticket": ticket}
    return {"kind": "route", "target": target, "args": args, **extra}
