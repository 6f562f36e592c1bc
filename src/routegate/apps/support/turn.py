"""One user turn's state, shared by the graph's nodes: the message, the memory, the router's choice, the tool
call, the fallback reason, and the sink its events go to.

The router and the Respond node receive it in the run's ``context``; the tool nodes are core workers that only
receive their validated arguments, so they read it from :data:`CURRENT_TURN` (a ``ContextVar`` set by the desk
around the run — each asyncio task and worker thread sees its own turn).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from routegate.apps.support.contracts import Message, SupportEvent
from routegate.apps.support.router import RouteChoice


@dataclass(slots=True)
class Turn:
    session_id: str
    message: str
    history: tuple[Message, ...]
    emit: Callable[[SupportEvent], None] | None = None
    choice: RouteChoice | None = None
    tool: str | None = None
    call: Mapping[str, Any] | None = None
    fallback: str | None = None
    notes: list[dict[str, Any]] = field(default_factory=list)
    emitted_route: bool = False

    def send(self, event: SupportEvent) -> None:
        if self.emit is not None:
            self.emit(event)

    def user_messages(self) -> list[str]:
        return [m.content for m in self.history if m.role == "user"]


CURRENT_TURN: ContextVar[Turn | None] = ContextVar("routegate_support_turn", default=None)


def current_turn() -> Turn | None:
    return CURRENT_TURN.get()
