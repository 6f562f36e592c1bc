"""Build a running support desk from :class:`~routegate.settings.Settings` (for the CLI and the server).

``DATABASE_URL`` set: that PostgreSQL (it needs pgvector). Unset: the embedded server in
``<data_dir>/support-pg``. ``OPENAI_API_KEY`` set: the LLM router layer, text-to-SQL and LLM answers switch on;
otherwise everything runs offline. The encoder is the embedded MiniLM unless one is passed in.

Start-up stays light for one-shot commands: the ``openai`` SDK is imported only when an LLM is configured, and the
encoder's model is loaded on its first use (a message the rules route never loads it). With no ``DATABASE_URL``,
a process already holding the embedded server of the same data dir (``routegate up`` / ``serve``) is reused:
attaching costs milliseconds and the server stays up for its other users when this process leaves. A caller may
begin the database's start earlier (:class:`~routegate.apps.support.embedded.DatabaseStart`, as the CLI does
before importing this module) and pass it in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypedDict

from routegate.apps.support._sqlallow import ALLOWED_TABLES
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.embedded import DatabaseStart, EmbeddedPostgres, embedded_server
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import Encoder, MemoEncoder, default_encoder
from routegate.llm.protocol import ChatModel, Probes
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.llm.openai_chat import OpenAIChatModel


def database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The URL to use and, for the embedded default, the server handle to stop afterwards. Blocking."""
    if settings.database_url:
        return settings.database_url, None
    server = embedded_server(settings)
    return server.start(), server


class DeskOptions(TypedDict):
    """The keyword options of a desk (:class:`SupportAgent` and the desks built on it) that settings decide."""

    max_message_chars: int
    row_cap: int
    statement_timeout_ms: int
    sql_max_bytes: int
    sql_max_field_chars: int


def desk_options(settings: Settings) -> DeskOptions:
    """The message limit and the SQL tool's bounds, from ``settings``."""
    return DeskOptions(
        max_message_chars=settings.max_message_chars,
        row_cap=settings.sql_max_rows,
        statement_timeout_ms=settings.sql_statement_timeout_ms,
        sql_max_bytes=settings.sql_max_bytes,
        sql_max_field_chars=settings.sql_max_field_chars,
    )


def desk_database(
    settings: Settings, url: str, *, schema: str, readable_tables: frozenset[str] = ALLOWED_TABLES
) -> SupportDatabase:
    """A desk's pool on the database at ``url``, sized and set as ``settings`` say (not opened yet)."""
    return SupportDatabase(
        url,
        schema=schema,
        readable_tables=readable_tables,
        max_size=settings.db_pool_size,
        asynchronous_commit=settings.db_asynchronous_commit,
        max_advisory_locks=settings.db_max_advisory_locks,
    )


@asynccontextmanager
async def open_support_desk(
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    chat_model: ChatModel | None = None,
    schema: str = "support",
    database: DatabaseStart | None = None,
) -> AsyncIterator[SupportAgent]:
    """``async with open_support_desk(settings) as desk:`` — started, and closed (server stopped) on exit.

    The LLM settings are checked first (a bad ``OPENAI_BASE_URL`` is refused before any database starts), so a
    configuration error is never reported as a database failure. ``database``: the database of ``settings``
    already being started (:class:`DatabaseStart`, begun before this module was imported); it is stopped on exit.
    """
    model: ChatModel | None = chat_model
    owned: OpenAIChatModel | None = None
    try:
        if model is None and settings.llm_enabled:
            from routegate.llm.openai_chat import OpenAIChatModel  # the SDK's import is slow: only when configured

            model = owned = OpenAIChatModel.from_settings(settings)
        if database is None:
            url, server = await asyncio.to_thread(database_url, settings)
        else:
            url, server = await asyncio.to_thread(database.result)
    except BaseException:
        if owned is not None:
            await owned.aclose()
        if database is not None:
            await asyncio.to_thread(database.stop)
        raise
    try:
        db = desk_database(settings, url, schema=schema)
        await db.open()
        try:
            # a text embedded twice in a turn (router, then vector tool) is embedded once
            enc = MemoEncoder(encoder or default_encoder())
            semantic = await asyncio.to_thread(FittedSemanticLayer.load_or_fit, enc, settings.data_dir)
            desk = SupportAgent(
                db=db,
                encoder=enc,
                chat_model=model,
                semantic=semantic,
                **desk_options(settings),
            )
            await desk.start()
            yield desk
        finally:
            await db.close()
    finally:
        if owned is not None:
            await owned.aclose()
        if database is not None:
            await asyncio.to_thread(database.stop)
        elif server is not None:
            await asyncio.to_thread(server.stop)


async def check_model(desk: SupportAgent, settings: Settings) -> str:
    """Check the desk's chat model once (what ``serve`` and ``up`` do at start) and say what was found, in one
    line. An unreachable model opens its breaker: the first turns are answered offline at once."""
    model = desk.chat_model
    if model is None:
        return "routegate: no chat model (OPENAI_API_KEY unset): answers come from the offline path"
    if not isinstance(model, Probes):
        return "routegate: chat model configured (not checked)"
    stop = await model.probe()
    where = settings.openai_base_url or "the OpenAI API"
    if stop is None:
        return f"routegate: chat model {settings.openai_model!r} at {where}: reachable"
    return (
        f"routegate: WARNING: the chat model {settings.openai_model!r} at {where} is unreachable ({stop.stop_reason}): "
        f"{stop.message}. The desk answers offline until it answers; it is tried again every "
        f"{settings.llm_breaker_seconds:g} s (ROUTEGATE_LLM_BREAKER_SECONDS)."
    )


def prime_support_desk(settings: Settings, url: str) -> None:
    """Create the schema, seed it and fit the router's layer once on the database at ``url``, then close: what a
    parent process does before its workers or replicas open their own desks on the same database."""

    async def prime() -> None:
        async with open_support_desk(settings.model_copy(update={"database_url": url})):
            pass

    asyncio.run(prime())
