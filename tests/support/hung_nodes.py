"""Desks whose plan has one node that never finishes: only the turn's deadline ends it."""

from __future__ import annotations

import asyncio
from typing import Any

from routegate.apps.support.contracts import ROUTES
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import QueryArgs
from routegate.core import Worker


async def forever() -> None:
    await asyncio.Event().wait()  # never set: only the deadline ends the wait


async def never_searches(query: str) -> dict[str, Any]:
    """A VECTOR worker that never answers."""
    await forever()
    raise AssertionError("unreachable")


def hang_vector(desk: SupportAgent, respond: RespondNode | None = None) -> None:
    """Rebuild ``desk``'s plan with a VECTOR tool that never answers (and ``respond`` as its Respond node)."""
    assert desk.router is not None and desk.gateway is not None
    workers = [w for w in desk.gateway.workers.values() if w.name != "VECTOR"]
    workers.append(Worker("VECTOR", never_searches, "a search that never answers", QueryArgs))
    desk._plan = desk.build_plan(desk.router, workers, routes=ROUTES, respond=respond or RespondNode())
