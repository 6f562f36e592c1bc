"""The support-desk agent: Router → Postgres / Vector / External / LLM → Respond."""

from routegate.apps.support.contracts import (
    ROUTES,
    AnswerToken,
    Message,
    RouteChosen,
    SupportDesk,
    SupportEvent,
    SupportRoute,
    ToolUsed,
    TurnError,
    TurnResult,
)

__all__ = [
    "ROUTES",
    "AnswerToken",
    "Message",
    "RouteChosen",
    "SupportDesk",
    "SupportEvent",
    "SupportRoute",
    "ToolUsed",
    "TurnError",
    "TurnResult",
]
