"""The support desk: Router → Postgres / Vector / External / LLM → Respond, built from a desk configuration.

* :class:`SupportAgent` — the one desk, the :class:`SupportDesk` implementation; its graph is a
  ``routegate.plan.Plan`` (:mod:`.graph`), its parts are built from its configuration (``desk.toml``; the built-in
  desk's by default, :mod:`routegate.apps.configured`). :func:`open_support_desk` builds a started one from
  :class:`~routegate.settings.Settings` and a desk directory (embedded PostgreSQL by default).
* The tools, callable alone: :class:`PostgresTool` (guarded read-only SQL, :func:`check_sql`), the knowledge base's
  search (:class:`~.vector_tool.KnowledgeBase`), the configured HTTP / MCP / mock tools (:mod:`.external_tool`).
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
    from routegate.apps.support.factory import open_support_desk
    from routegate.apps.support.fake import FakeSupportDesk
    from routegate.apps.support.memory import MessageStore
    from routegate.apps.support.postgres_tool import PostgresTool
    from routegate.apps.support.router import RouteChoice, SupportRouter
    from routegate.apps.support.semantic import ExampleEmbeddingLayer

__all__ = [
    "AnswerToken",
    "DatabaseUnavailableError",
    "ExampleEmbeddingLayer",
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
    "open_support_desk": "factory",
    "MessageStore": "memory",
    "PostgresTool": "postgres_tool",
    "RouteChoice": "router",
    "SupportRouter": "router",
    "ExampleEmbeddingLayer": "semantic",
}

_MOVED = {  # the desk's own parts: its database, SQL guard, tool results and route table
    "CheckedQuery": "sqlguard",
    "EmbeddedPostgres": "db",
    "EmbeddingLayer": "semantic",
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

_REMOVED = {  # the built-in desk's own tools: the desk's tools are built from its configuration now
    "VectorTool": (
        "the desk's vector tool is routegate.apps.support.vector_tool.KnowledgeBase (the configuration's documents, "
        "ingested at start or with `routegate kb ingest`; the built-in desk's three help articles are its docs/)"
    ),
    "Document": "the vector tool's results are routegate.apps.support.vector_tool.Passage",
    "ExternalTool": (
        "the EXTERNAL route's tools are the configuration's [[tools]] (routegate.apps.support.external_tool.run_tool; "
        "the built-in desk's mock weather and crypto answers are its `mock` tools)"
    ),
    "ExternalResult": "a configured tool answers with its response (routegate.apps.support.external_tool.run_tool)",
}

__getattr__, __dir__ = _lazy_exports(__name__, _MODULES, __all__, moved=_MOVED, removed=_REMOVED)
