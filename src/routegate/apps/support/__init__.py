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

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from routegate.apps.support.contracts import (
        AnswerToken,
        RouteChosen,
        SupportDesk,
        SupportEvent,
        ToolUsed,
        TurnError,
        TurnResult,
    )
    from routegate.apps.support.db import DatabaseUnavailableError
    from routegate.apps.support.desk import SupportAgent
    from routegate.apps.support.errors import InvalidSessionIdError, TurnFailedError
    from routegate.apps.support.external_tool import ExternalTool
    from routegate.apps.support.factory import open_support_desk
    from routegate.apps.support.fake import FakeSupportDesk
    from routegate.apps.support.memory import MessageStore
    from routegate.apps.support.postgres_tool import PostgresTool
    from routegate.apps.support.router import RouteChoice, SupportRouter
    from routegate.apps.support.semantic import ExampleEmbeddingLayer
    from routegate.apps.support.vector_tool import VectorTool

__all__ = [
    "AnswerToken",
    "DatabaseUnavailableError",
    "ExampleEmbeddingLayer",
    "ExternalTool",
    "FakeSupportDesk",
    "InvalidSessionIdError",
    "MessageStore",
    "PostgresTool",
    "RouteChoice",
    "RouteChosen",
    "SupportAgent",
    "SupportDesk",
    "SupportEvent",
    "SupportRouter",
    "ToolUsed",
    "TurnError",
    "TurnFailedError",
    "TurnResult",
    "VectorTool",
    "open_support_desk",
]

_MODULES: dict[str, str] = {
    "AnswerToken": "contracts",
    "RouteChosen": "contracts",
    "SupportDesk": "contracts",
    "SupportEvent": "contracts",
    "ToolUsed": "contracts",
    "TurnError": "contracts",
    "TurnResult": "contracts",
    "DatabaseUnavailableError": "db",
    "SupportAgent": "desk",
    "InvalidSessionIdError": "errors",
    "TurnFailedError": "errors",
    "FakeSupportDesk": "fake",
    "ExternalTool": "external_tool",
    "open_support_desk": "factory",
    "MessageStore": "memory",
    "PostgresTool": "postgres_tool",
    "RouteChoice": "router",
    "SupportRouter": "router",
    "ExampleEmbeddingLayer": "semantic",
    "VectorTool": "vector_tool",
}

_MOVED = {  # the desk's own parts: its database, SQL guard, tool results and route table
    "CheckedQuery": "sqlguard",
    "Document": "vector_tool",
    "EmbeddedPostgres": "db",
    "EmbeddingLayer": "semantic",
    "ExternalResult": "external_tool",
    "FittedSemanticLayer": "semantic",
    "Message": "contracts",
    "ROUTES": "contracts",
    "SqlRefusedError": "sqlguard",
    "SqlResult": "postgres_tool",
    "SupportDatabase": "db",
    "SupportRoute": "contracts",
    "ToolError": "errors",
    "check_sql": "sqlguard",
}

__getattr__, __dir__ = _lazy_exports(__name__, _MODULES, __all__, moved=_MOVED)
