"""The support-desk agent: Router → Postgres / Vector / External / LLM → Respond.

* :class:`SupportAgent` — the :class:`SupportDesk` implementation; its graph is a ``routegate.plan.Plan``
  (:mod:`.graph`). :func:`open_support_desk` builds a started one from :class:`~routegate.settings.Settings`
  (embedded PostgreSQL by default).
* The tools, callable alone: :class:`PostgresTool` (guarded read-only SQL, :func:`check_sql`),
  :class:`VectorTool` (pgvector search over the help articles), :class:`ExternalTool` (mock weather / crypto).
* :class:`SupportRouter` — rules → embeddings (:class:`FittedSemanticLayer`) → LLM (when configured) → default.
* :class:`MessageStore` — the last 10 messages per session, in PostgreSQL.
"""

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
from routegate.apps.support.errors import ToolError
from routegate.apps.support.external_tool import ExternalResult, ExternalTool
from routegate.apps.support.factory import open_support_desk
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
    "FittedSemanticLayer",
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
    "TurnResult",
    "VectorTool",
    "check_sql",
    "open_support_desk",
]
