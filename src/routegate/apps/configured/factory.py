"""Build a running configured desk from :class:`~routegate.settings.Settings` and a desk directory — the same
path as :func:`routegate.apps.support.factory.open_support_desk`: ``DATABASE_URL`` or the embedded PostgreSQL,
the LLM parts when ``OPENAI_API_KEY`` is set, the embedded encoder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from routegate.apps.configured.config import DeskConfig, DeskConfigError, builtin_desk_dir, load_config
from routegate.apps.configured.database import state_schema
from routegate.apps.configured.desk import ConfiguredDesk
from routegate.apps.configured.mistakes import config_file
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.embedded import DatabaseStart
from routegate.apps.support.factory import database_url, desk_database, desk_options
from routegate.embed import Encoder, MemoEncoder, default_encoder
from routegate.llm.protocol import ChatModel
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.llm.openai_chat import OpenAIChatModel
    from routegate.technique.tools import MCPToolPool


def _databases(
    config: DeskConfig, desk_dir: Path, url: str, settings: Settings
) -> tuple[SupportDatabase, SupportDatabase]:
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
async def open_configured_desk(
    settings: Settings,
    desk_dir: Path,
    *,
    encoder: Encoder | None = None,
    chat_model: ChatModel | None = None,
    database: DatabaseStart | None = None,
    ingest_on_start: bool = True,
) -> AsyncIterator[ConfiguredDesk]:
    """``async with open_configured_desk(settings, Path("shop")) as desk:`` — started, and closed on exit."""
    config = load_config(desk_dir)  # a bad configuration is reported before anything starts
    async with AsyncExitStack() as stack:
        if database is not None:
            stack.push_async_callback(asyncio.to_thread, database.stop)
        model: ChatModel | None = chat_model
        if model is None and settings.llm_enabled:
            from routegate.llm.openai_chat import OpenAIChatModel

            owned: OpenAIChatModel = OpenAIChatModel.from_settings(settings)
            stack.push_async_callback(owned.aclose)
            model = owned
        if database is None:
            url, server = await asyncio.to_thread(database_url, settings)
            if server is not None:
                stack.push_async_callback(asyncio.to_thread, server.stop)
        else:
            url, _ = await asyncio.to_thread(database.result)
        data, state = _databases(config, Path(desk_dir), url, settings)
        mcp = None
        if config.mcp_servers:
            mcp = _mcp_pool(config, Path(desk_dir))
            stack.push_async_callback(mcp.aclose)
        await state.open()
        stack.push_async_callback(state.close)
        await data.open()
        stack.push_async_callback(data.close)
        desk = ConfiguredDesk(
            config,
            desk_dir,
            data=data,
            state=state,
            encoder=MemoEncoder(encoder or default_encoder()),
            chat_model=model,
            ingest_on_start=ingest_on_start,
            mcp=mcp,
            cache_dir=settings.data_dir,
            **desk_options(settings),
        )
        await desk.start()
        yield desk


def desk_directory(settings: Settings) -> Path:
    """The desk ``settings`` name (``--desk`` / ``ROUTEGATE_DESK``), else the built-in desk's configuration."""
    return settings.desk if settings.desk is not None else builtin_desk_dir()


def prime_configured_desk(settings: Settings, url: str) -> None:
    """Load the data, create the state and ingest the documents once on the database at ``url``, then close: what
    ``serve --workers N`` does before its workers open the desk on the same database."""
    where = desk_directory(settings)

    async def prime() -> None:
        async with open_configured_desk(settings.model_copy(update={"database_url": url}), where):
            pass

    asyncio.run(prime())
