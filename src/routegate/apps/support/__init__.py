"""The support-desk agent: Router → Postgres / Vector / External / LLM → Respond.

* :class:`SupportAgent` — the :class:`SupportDesk` implementation; its graph is a ``routegate.plan.Plan``
  (:mod:`.graph`). :func:`open_support_desk` builds a started one from :class:`~routegate.settings.Settings`
  (embedded PostgreSQL by default).
* The tools, callable alone: :class:`PostgresTool` (guarded read-only SQL, :func:`check_sql`),
  :class:`VectorTool` (pgvector search over the help articles), :class:`ExternalTool` (mock weather / crypto).
* :class:`SupportRouter` — rules → embeddings (:class:`FittedSemanticLayer`) → LLM (when configured) → default.
* :class:`MessageStore` — the last 10 messages per session, in PostgreSQL.
* :class:`FakeSupportDesk` — a scripted in-memory desk that keeps the same contract, for tests of what sits on
  the desk (the server, the UI); one contract test runs against both.

Importing the package is cheap: each name is imported from its module on first use (:pep:`562`), so a command
that needs only the contracts does not load the database driver, the encoder or the SQL parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    from routegate.apps.support.db import DatabaseUnavailableError, EmbeddedPostgres, SupportDatabase
    from routegate.apps.support.desk import SupportAgent
    from routegate.apps.support.errors import InvalidSessionIdError, ToolError, TurnFailedError
    from routegate.apps.support.external_tool import ExternalResult, ExternalTool
    from routegate.apps.support.factory import open_support_desk
    from routegate.apps.support.fake import FakeSupportDesk
    from routegate.apps.support.memory import MessageStore
    from routegate.apps.support.postgres_tool import PostgresTool, SqlResult
    from routegate.apps.support.router import RouteChoice, SupportRouter
    from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer, FittedSemanticLayer
    from routegate.apps.support.sqlguard import CheckedQuery, SqlRefusedError, check_sql
    from routegate.apps.support.vector_tool import Document, VectorTool

__all__ = [
    "ROUTES",
    "AnswerToken",
    "CheckedQuery",
    "DatabaseUnavailableError",
    "Document",
    "EmbeddedPostgres",
    "EmbeddingLayer",
    "ExampleEmbeddingLayer",
    "ExternalResult",
    "ExternalTool",
    "FakeSupportDesk",
    "FittedSemanticLayer",
    "InvalidSessionIdError",
    "Message",
    "MessageStore",
    "PostgresTool",
    "RouteChoice",
    "RouteChosen",
    "SqlRefusedError",
    "SqlResult",
    "SupportAgent",
    "SupportDatabase",
    "SupportDesk",
    "SupportEvent",
    "SupportRoute",
    "SupportRouter",
    "ToolError",
    "ToolUsed",
    "TurnError",
    "TurnFailedError",
    "TurnResult",
    "VectorTool",
    "check_sql",
    "open_support_desk",
]

_MODULES: dict[str, str] = {
    "ROUTES": "routegate.apps.support.contracts",
    "AnswerToken": "routegate.apps.support.contracts",
    "Message": "routegate.apps.support.contracts",
    "RouteChosen": "routegate.apps.support.contracts",
    "SupportDesk": "routegate.apps.support.contracts",
    "SupportEvent": "routegate.apps.support.contracts",
    "SupportRoute": "routegate.apps.support.contracts",
    "ToolUsed": "routegate.apps.support.contracts",
    "TurnError": "routegate.apps.support.contracts",
    "TurnResult": "routegate.apps.support.contracts",
    "DatabaseUnavailableError": "routegate.apps.support.db",
    "EmbeddedPostgres": "routegate.apps.support.db",
    "SupportDatabase": "routegate.apps.support.db",
    "SupportAgent": "routegate.apps.support.desk",
    "ToolError": "routegate.apps.support.errors",
    "InvalidSessionIdError": "routegate.apps.support.errors",
    "TurnFailedError": "routegate.apps.support.errors",
    "FakeSupportDesk": "routegate.apps.support.fake",
    "ExternalResult": "routegate.apps.support.external_tool",
    "ExternalTool": "routegate.apps.support.external_tool",
    "open_support_desk": "routegate.apps.support.factory",
    "MessageStore": "routegate.apps.support.memory",
    "PostgresTool": "routegate.apps.support.postgres_tool",
    "SqlResult": "routegate.apps.support.postgres_tool",
    "RouteChoice": "routegate.apps.support.router",
    "SupportRouter": "routegate.apps.support.router",
    "EmbeddingLayer": "routegate.apps.support.semantic",
    "ExampleEmbeddingLayer": "routegate.apps.support.semantic",
    "FittedSemanticLayer": "routegate.apps.support.semantic",
    "CheckedQuery": "routegate.apps.support.sqlguard",
    "SqlRefusedError": "routegate.apps.support.sqlguard",
    "check_sql": "routegate.apps.support.sqlguard",
    "Document": "routegate.apps.support.vector_tool",
    "VectorTool": "routegate.apps.support.vector_tool",
}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
