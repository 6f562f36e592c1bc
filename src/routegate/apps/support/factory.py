"""Build a running support desk from :class:`~routegate.settings.Settings` (for the CLI and the server).

``DATABASE_URL`` set: that PostgreSQL (it needs pgvector). Unset: the embedded server in
``<data_dir>/support-pg``. ``OPENAI_API_KEY`` set: the LLM router layer, text-to-SQL and LLM answers switch on;
otherwise everything runs offline. The encoder is the embedded MiniLM unless one is passed in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import Encoder, MemoEncoder, default_encoder
from routegate.llm import OpenAIChatModel
from routegate.llm.protocol import ChatModel
from routegate.settings import Settings


def database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The URL to use and, for the embedded default, the server handle to stop afterwards. Blocking."""
    if settings.database_url:
        return settings.database_url, None
    server = EmbeddedPostgres(settings.data_dir / "support-pg")
    return server.start(), server


@asynccontextmanager
async def open_support_desk(
    settings: Settings,
    *,
    encoder: Encoder | None = None,
    chat_model: ChatModel | None = None,
    schema: str = "support",
) -> AsyncIterator[SupportAgent]:
    """``async with open_support_desk(settings) as desk:`` — started, and closed (server stopped) on exit.

    The LLM settings are checked first (a bad ``OPENAI_BASE_URL`` is refused before any database starts), so a
    configuration error is never reported as a database failure.
    """
    model: ChatModel | None = chat_model
    owned: OpenAIChatModel | None = None
    if model is None and settings.llm_enabled:
        model = owned = OpenAIChatModel.from_settings(settings)
    try:
        url, server = await asyncio.to_thread(database_url, settings)
    except BaseException:
        if owned is not None:
            await owned.aclose()
        raise
    try:
        db = SupportDatabase(
            url, schema=schema, max_size=settings.db_pool_size, asynchronous_commit=settings.db_asynchronous_commit
        )
        await db.open()
        try:
            # a text embedded twice in a turn (router, then vector tool) is embedded once
            enc = MemoEncoder(encoder or default_encoder())
            semantic = await asyncio.to_thread(FittedSemanticLayer.load_or_fit, enc, settings.data_dir)
            desk = SupportAgent(
                db=db, encoder=enc, chat_model=model, semantic=semantic, max_message_chars=settings.max_message_chars
            )
            await desk.start()
            yield desk
        finally:
            await db.close()
    finally:
        if owned is not None:
            await owned.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
