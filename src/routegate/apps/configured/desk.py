"""A configured desk: the built-in support desk's engine (the same turn, memory, governance, events and
results: :class:`~routegate.apps.support.desk.SupportAgent`) running a plan built from ``desk.toml``.

What differs is only configuration: the router's rules and examples (:mod:`.router`), the SQL tool's allowlist and
the offline planner (:mod:`.planner`), the knowledge base (:mod:`.kb`), the HTTP tools (:mod:`.tools`) and the
Respond node's wording (:mod:`.respond`). The plan is the built-in one (:func:`~routegate.apps.support.graph.
support_plan`: router → one tool → Respond); only the kinds the desk has are allowed and have workers.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate.apps.configured.config import DeskConfig
from routegate.apps.configured.database import prepare
from routegate.apps.configured.fitted import desk_embedding_layer
from routegate.apps.configured.kb import IngestReport, KnowledgeBase, calibrated, ensure_tables, ingest
from routegate.apps.configured.planner import SqlPlanner
from routegate.apps.configured.respond import DeskAnswers
from routegate.apps.configured.router import DeskRouter, present_routes
from routegate.apps.configured.workers import DeskSqlTool, DeskTextToSql, desk_workers
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.embed import Encoder
from routegate.llm.protocol import ChatModel

if TYPE_CHECKING:
    from routegate.technique.tools import MCPToolPool


class ConfiguredDesk(SupportAgent):
    """A :class:`~routegate.apps.support.contracts.SupportDesk` built from a desk configuration. ``data``: the pool
    on the readable tables' schema; ``state``: the pool on the desk's own schema (memory, knowledge base); ``mcp``:
    the pool the configured MCP tools call through (:func:`~.factory.open_configured_desk` makes it); ``cache_dir``: where
    a ``[router] fit_at_start`` layer is cached (the data directory; ``None``: fitted at every start). The other
    ``options`` are :class:`SupportAgent`'s (``budget``, ``flows``, ``on_refusal``, the SQL bounds...), and mean the
    same here: the plan is wired by :meth:`SupportAgent.build_plan`."""

    def __init__(
        self,
        config: DeskConfig,
        desk_dir: Path,
        *,
        data: SupportDatabase,
        state: SupportDatabase,
        encoder: Encoder,
        chat_model: ChatModel | None = None,
        ingest_on_start: bool = True,
        mcp: MCPToolPool | None = None,
        cache_dir: Path | None = None,
        **options: Any,
    ) -> None:
        self.config = config
        self.desk_dir = Path(desk_dir)
        self.data = data
        super().__init__(db=state, encoder=encoder, chat_model=chat_model, **options)  # builds the SQL tool
        self.ingest_on_start = ingest_on_start
        self.mcp = mcp
        self.cache_dir = cache_dir
        self.kb = KnowledgeBase(
            state, self.encoder, min_score=config.knowledge.min_score, language=config.knowledge.language
        )
        self.planner = SqlPlanner(config)
        self.answers = DeskAnswers(config)
        self.ingested: IngestReport | None = None

    postgres: DeskSqlTool

    def sql_tool(self, **bounds: int) -> DeskSqlTool:
        """The built-in SQL tool with the desk's bounds, on the readable tables' pool (``data``), allowed only the
        configured columns of the configured tables."""
        return DeskSqlTool(self.data, self.config, **bounds)

    @property
    def sql(self) -> DeskSqlTool:
        """The desk's SQL tool (``postgres``)."""
        return self.postgres

    async def start(self) -> None:
        """Load the data (``source = "sql"``), create the desk's state, bring the knowledge base up to date, build
        the router and the plan."""
        await prepare(self.config, self.desk_dir, self.data, self.db)
        await self.sql.prime()
        if self.config.knowledge.paths:
            if self.ingest_on_start:
                self.ingested = await ingest(self.config, self.desk_dir, self.db, self.encoder)
            else:
                await ensure_tables(self.db, self.encoder.dim, self.config.knowledge.language)
                await calibrated(self.db, self.encoder)  # a desk ingested before the cut-off was calibrated
        if self.semantic is None:
            self.semantic = await asyncio.to_thread(
                partial(desk_embedding_layer, self.config, self.desk_dir, self.encoder, cache_dir=self.cache_dir)
            )
        self.router = DeskRouter(self.config, semantic=self.semantic, chat_model=self.chat_model)
        workers = desk_workers(
            self.config,
            sql=self.sql,
            planner=self.planner,
            kb=self.kb,
            text_to_sql=DeskTextToSql(self.chat_model, self.config) if self.chat_model is not None else None,
            mcp=self.mcp,
        )
        respond = self.answers.respond_node(self.chat_model)
        # the built-in plan: every engine route is a step (the router's output type names all four); a kind the
        # desk lacks is refused by the policy before the plan could route there, and has no worker behind the gateway
        self._plan = self.build_plan(self.router, workers, routes=present_routes(self.config), respond=respond)

    async def healthy(self) -> bool:
        return await super().healthy() and (self.data is self.db or await self.data.ping())
