"""Build a running desk from :class:`~routegate.settings.Settings` and a desk directory (for the CLI, the server and
its workers): ``--desk DIR`` / ``ROUTEGATE_DESK``, else the built-in desk's configuration.

``DATABASE_URL`` set: that PostgreSQL (it needs pgvector). Unset: the embedded server in ``<data_dir>/support-pg``.
``OPENAI_API_KEY`` set: the LLM router layer, text-to-SQL and LLM answers switch on; otherwise everything runs
offline. The encoders are the ones ``desk.toml`` names (``[router] encoder``, ``[knowledge] encoder``,
:mod:`routegate.apps.configured.encoders`); where it names none (or ``minilm``): the encoder passed in, else the
embedded MiniLM.

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
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from routegate.apps.configured.config import DeskConfig, DeskConfigError, builtin_desk_dir, load_config
from routegate.apps.configured.database import state_schema
from routegate.apps.configured.encoders import desk_encoders
from routegate.apps.configured.mistakes import config_file
from routegate.apps.configured.routes import desk_directory
from routegate.apps.support._sqlallow import ALLOWED_TABLES
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.embedded import DatabaseStart, EmbeddedPostgres, embedded_server
from routegate.embed import Encoder, MemoEncoder
from routegate.errors import ConfigurationError
from routegate.llm.protocol import ChatModel, Probes
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.llm.openai_chat import OpenAIChatModel
    from routegate.technique.tools import MCPToolPool


def database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The URL to use and, for the embedded default, the server handle to stop afterwards. Blocking."""
    if settings.database_url:
        return settings.database_url, None
    server = embedded_server(settings)
    return server.start(), server


class DeskOptions(TypedDict):
    """The keyword options of a desk (:class:`SupportAgent`) that settings decide."""

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


def _databases(
    config: DeskConfig, desk_dir: Path, url: str, settings: Settings
) -> tuple[SupportDatabase, SupportDatabase]:
    """The pools of a desk: on its readable tables' schema, and on its own (state) schema."""
    if config.database.source == "url" and not settings.database_url:
        raise DeskConfigError(
            f'{config_file(desk_dir)}: database.source = "url" reads an existing PostgreSQL: set DATABASE_URL to its '
            "URL"
        )
    readable = frozenset(t.name for t in config.tables)
    data = desk_database(settings, url, schema=config.database.schema_name, readable_tables=readable)
    return data, desk_database(settings, url, schema=state_schema(config), readable_tables=frozenset())


def _mcp_pool(config: DeskConfig, desk_dir: Path) -> MCPToolPool:
    """The desk's MCP servers, started on first use (stdio commands run in the desk directory)."""
    from routegate.technique.tools import MCPServerConfig, MCPToolPool

    return MCPToolPool(
        MCPServerConfig(
            m.name,
            command=m.command,
            args=tuple(m.args),
            env=m.env or None,
            cwd=str(desk_dir.resolve()) if m.command is not None else None,
            url=m.url,
            connect_timeout=m.connect_timeout_seconds,
            call_timeout=m.call_timeout_seconds,
        )
        for m in config.mcp_servers
    )


@asynccontextmanager
async def open_support_desk(
    settings: Settings,
    desk_dir: Path | None = None,
    *,
    encoder: Encoder | None = None,
    chat_model: ChatModel | None = None,
    database: DatabaseStart | None = None,
    ingest_on_start: bool = True,
    schema: str | None = None,
) -> AsyncIterator[SupportAgent]:
    """``async with open_support_desk(settings) as desk:`` — the desk at ``desk_dir`` (default: the one ``settings``
    name, :func:`desk_directory`), started, and closed (its pools, its MCP servers, the embedded server) on exit.

    The configuration is checked first, then the LLM settings (a bad ``OPENAI_BASE_URL`` is refused before any
    database starts), so a configuration error is never reported as a database failure. ``database``: the
    database of ``settings`` already being started (:class:`DatabaseStart`, begun before this module was
    imported); it is stopped on exit. ``schema``: the built-in desk kept whole in this one schema (its tables, its
    conversations and its knowledge base) instead of its configuration's two. ``encoder``: the desk's encoder where
    its ``desk.toml`` names none or ``minilm`` (default: the embedded MiniLM); an encoder it names (``openai``,
    ``multilingual-e5``) is built here from ``settings`` and closed on exit."""
    where = desk_directory(settings) if desk_dir is None else Path(desk_dir)
    config = load_config(where)  # a bad configuration is reported before anything starts
    one_schema = schema is not None
    if one_schema and where.resolve() != builtin_desk_dir().resolve():
        raise ConfigurationError(f"schema= keeps the built-in desk in one schema; {where} is another desk")
    router_encoder, knowledge_encoder = desk_encoders(config, where, settings, encoder)  # so are its encoders
    async with AsyncExitStack() as stack:
        if database is not None:
            stack.push_async_callback(asyncio.to_thread, database.stop)
        for built in {id(e): e for e in (router_encoder, knowledge_encoder) if e is not encoder}.values():
            if callable(close := getattr(built, "aclose", None)):  # an endpoint's clients
                stack.push_async_callback(close)
        model: ChatModel | None = chat_model
        if model is None and settings.llm_enabled:
            from routegate.llm.openai_chat import OpenAIChatModel  # the SDK's import is slow: only when configured

            owned: OpenAIChatModel = OpenAIChatModel.from_settings(settings)
            stack.push_async_callback(owned.aclose)
            model = owned
        if database is None:
            url, server = await asyncio.to_thread(database_url, settings)
            if server is not None:
                stack.push_async_callback(asyncio.to_thread, server.stop)
        else:
            url, _ = await asyncio.to_thread(database.result)
        if schema is not None:
            data = state = desk_database(settings, url, schema=schema)
        else:
            data, state = _databases(config, where, url, settings)
        mcp = None
        if config.mcp_servers:
            mcp = _mcp_pool(config, where)
            stack.push_async_callback(mcp.aclose)
        await state.open()
        stack.push_async_callback(state.close)
        if data is not state:
            await data.open()
            stack.push_async_callback(data.close)
        desk = SupportAgent(
            None if one_schema else config,
            None if one_schema else where,
            db=state,
            data=None if one_schema else data,
            # a text embedded twice in a turn (router, then vector tool) is embedded once
            encoder=MemoEncoder(router_encoder),
            knowledge_encoder=knowledge_encoder,
            chat_model=model,
            ingest_on_start=ingest_on_start,
            mcp=mcp,
            cache_dir=settings.data_dir,
            **desk_options(settings),
        )
        await desk.start()
        yield desk


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
    """Load the desk's data, create its state, ingest its documents and fit its router's layer once on the database
    at ``url``, then close: what a parent process does before its workers or replicas open their own desks on the
    same database (``serve --workers N``, ``serve --ray``)."""

    async def prime() -> None:
        async with open_support_desk(settings.model_copy(update={"database_url": url})):
            pass

    asyncio.run(prime())
