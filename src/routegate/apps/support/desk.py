"""The support desk: a prebuilt :class:`routegate.plan.Plan` — router → (Postgres | Vector | External) → Respond —
with memory around it, built from a desk configuration (``desk.toml``; the built-in desk's by default).

The one desk: the built-in support desk is its configuration (``apps/configured/builtin/``), a team's own desk is
another; both run here, with the same router (:mod:`.router`), tools (:mod:`.nodes`), answers (:mod:`.answers`)
and plan. Wiring only. The graph is the plan of :mod:`.graph`: the ``router`` step routes by the router's choice
after the core policy boundary accepted it; the tool steps delegate through the core gateway under the run's
delegation ledger (one delegation: no retry and no second tool, as the spec requires); the ``LLM`` step is the
Respond node, the direct LLM route and every fallback. One run of the plan is one turn of its runtime
(:class:`~.runtime.DeskRuntime`, the engine's public seam): the plan's budget is the desk's, so the turn's deadline
(``max_seconds``) and the phase a deadline stop reports are the engine's, and the turn's result is made from the
turn's state. Memory (the last 10 messages, in PostgreSQL) is read before the run, under the session's lock, into
the turn's read-only input (:class:`~.turn.TurnInput`, the run's ``deps``, with the tenant it acts for), and
written after it, through the same holding, with what the turn established.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from opentelemetry.trace import Span

from routegate._extras import needs
from routegate._lazy import renamed_method
from routegate.core._faults import fault_message

with needs("desk"):
    import psycopg
    from psycopg_pool import PoolTimeout

from routegate.apps.configured.config import DeskConfig, builtin_desk_dir
from routegate.apps.configured.database import prepare
from routegate.apps.configured.fitted import desk_embedding_layer
from routegate.apps.configured.kb import IngestReport, calibrated, ensure_tables, ingest
from routegate.apps.configured.routes import builtin_config, present_routes
from routegate.apps.support.advisory import LockCapacityError, LockTimeoutError
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.contracts import (
    Message,
    Role,
    SupportEvent,
    SupportRoute,
    TurnError,
    TurnResult,
)
from routegate.apps.support.db import DatabaseUnavailableError, SupportDatabase
from routegate.apps.support.doors import DeskDoors
from routegate.apps.support.graph import SUPPORT_BUDGET as SUPPORT_BUDGET  # the desk's default budget
from routegate.apps.support.graph import RouterStep, ToolStep, support_plan
from routegate.apps.support.inputs import check_session_id
from routegate.apps.support.memory import MAX_STORED_CHARS, MEMORY_LIMIT, MessageStore, SessionHold
from routegate.apps.support.nodes import TextToSql, desk_workers
from routegate.apps.support.payloads import TurnState
from routegate.apps.support.planner import SqlPlanner
from routegate.apps.support.postgres_tool import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FIELD_CHARS,
    DEFAULT_ROW_CAP,
    DEFAULT_STATEMENT_TIMEOUT_MS,
    PostgresTool,
)
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import QueryArgs, RouteChoice, SupportRouter
from routegate.apps.support.runtime import DeskRuntime
from routegate.apps.support.semantic import EmbeddingLayer
from routegate.apps.support.supplied import SuppliedHistory, read_supplied
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.apps.support.turn import TurnInput, read_turn
from routegate.apps.support.vector_tool import KnowledgeBase
from routegate.core import Budget, RouteGateway, RoutePolicy, RunContext, Worker
from routegate.core._stream import stream_events
from routegate.core.events import FinalEvent
from routegate.core.governed import GovernedStep, OnRefusal
from routegate.core.messages import DEFAULT_MAX_MESSAGE_CHARS, check_message
from routegate.core.provenance import From
from routegate.core.telemetry import Attr, end_run, spans_for, tracer
from routegate.embed import Encoder, MemoEncoder, request_scope
from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.llm.protocol import ChatModel, ModelHealth, ReportsHealth
from routegate.plan import Plan

if TYPE_CHECKING:
    from routegate.technique.tools import MCPToolPool

logger = logging.getLogger(__name__)

TOOL_ROUTES: Final = ("POSTGRES", "VECTOR", "EXTERNAL")
"""The routes a tool serves (the LLM route is the Respond node: no arguments to rule on)."""

_NOT_STARTED: Final = "SupportAgent.start() must be awaited before the desk is used"


class SupportAgent(DeskDoors):
    """The :class:`~routegate.apps.support.contracts.SupportDesk` implementation: the desk of ``config`` (the
    built-in desk's configuration when ``None``; ``desk_dir``, the directory its relative paths are in, is then the
    built-in one). Call :meth:`start` first.

    ``db`` is the desk's own database (its schema holds the conversations and the knowledge base's chunks);
    ``data`` the pool on the readable tables' schema (:func:`~routegate.apps.support.factory.open_support_desk`
    makes both). Without ``data`` the desk reads its tables in ``db``'s schema, as they are there; for the built-in
    configuration :meth:`start` puts the spec's customers and tickets there first
    (:meth:`~routegate.apps.support.db.SupportDatabase.ensure_schema`). ``mcp``: the pool the configured MCP tools
    call through; ``knowledge_encoder``: what the knowledge base embeds with (``[knowledge] encoder``; default
    ``encoder``, the router's); ``cache_dir``: where a ``[router] fit_at_start`` layer is cached (the data directory; ``None``:
    fitted at every start); ``semantic``: the router's embedding layer, instead of the configuration's.

    Every entry point that takes a user message checks it with :func:`routegate.core.messages.check_message`
    (``max_message_chars``: ``ROUTEGATE_MAX_MESSAGE_CHARS``): :meth:`iter` answers a refused message with an
    ``error`` event whose code is the problem (``empty_message``, ``message_too_long``, ``invalid_text``),
    :meth:`ask` and :meth:`route` raise :class:`~routegate.core.messages.InvalidMessageError`.

    ``flows`` gives the tools flow rules (``{"EXTERNAL": {"query": From("user")}}``, :mod:`routegate.core.provenance`):
    the turn then labels its sources (the message and the user's earlier messages ``user``, the desk's earlier
    answers ``tool:memory#<n>``, the tool's output ``tool:<ROUTE>#1``), a decision whose argument no allowed
    source holds is refused before the tool runs (``route_denied:provenance:<arg>``) and the trace's ``policy`` and
    ``gateway`` notes carry the arguments' origins. ``on_refusal`` says what a refused decision does: ``"end"``
    (the default) ends the turn; ``"observe"`` hands it back to the router, which does not offer that route again,
    while ``budget.max_route_attempts`` lasts (:class:`~routegate.apps.support.graph.RouterStep`).
    """

    def __init__(
        self,
        config: DeskConfig | None = None,
        desk_dir: Path | None = None,
        *,
        db: SupportDatabase,
        encoder: Encoder,
        knowledge_encoder: Encoder | None = None,
        data: SupportDatabase | None = None,
        chat_model: ChatModel | None = None,
        budget: Budget = SUPPORT_BUDGET,
        memory_limit: int = MEMORY_LIMIT,
        row_cap: int = DEFAULT_ROW_CAP,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        sql_max_bytes: int = DEFAULT_MAX_BYTES,
        sql_max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
        vector_min_score: float | None = None,
        semantic: EmbeddingLayer | None = None,
        max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
        flows: Mapping[str, Mapping[str, From]] | None = None,
        on_refusal: OnRefusal = "end",
        ingest_on_start: bool = True,
        mcp: MCPToolPool | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        if max_message_chars < 1:
            raise ConfigurationError(f"max_message_chars must be >= 1, got {max_message_chars}")
        if on_refusal not in ("end", "observe"):
            raise ConfigurationError(f"on_refusal must be 'end' or 'observe', got {on_refusal!r}")
        if config is not None and desk_dir is None:
            raise ConfigurationError("a desk configuration needs its directory: SupportAgent(config, desk_dir, ...)")
        unknown = sorted(set(flows or {}) - set(TOOL_ROUTES))
        if unknown:
            raise ConfigurationError(f"flows names {unknown}; the desk's tools are {list(TOOL_ROUTES)}")
        self._demo_data = config is None  # the built-in desk on one database: start() seeds its tables
        self.config = config or builtin_config()
        self.desk_dir = Path(desk_dir) if desk_dir is not None else builtin_desk_dir()
        self.flows = dict(flows or {})
        self.on_refusal: OnRefusal = on_refusal
        self.db = db
        self.data = data or db
        self.max_message_chars = max_message_chars
        # within a turn's request scope a text is embedded once (the router's vector is the vector tool's)
        self.encoder = encoder if isinstance(encoder, MemoEncoder) else MemoEncoder(encoder)
        # the knowledge base's documents and questions: the router's encoder unless [knowledge] encoder names another
        self.kb_encoder = (
            self.encoder
            if knowledge_encoder is None or knowledge_encoder is encoder or knowledge_encoder is self.encoder.inner
            else MemoEncoder(knowledge_encoder)
        )
        self.chat_model = chat_model
        self.budget = budget
        self.memory = MessageStore(db, limit=memory_limit, max_chars=max(max_message_chars, MAX_STORED_CHARS))
        # the one SQL tool, on the readable tables' pool, allowed only the configured columns of the configured tables
        self.postgres = PostgresTool(
            self.data,
            columns=self.config.readable_columns(),
            row_cap=row_cap,
            statement_timeout_ms=statement_timeout_ms,
            max_bytes=sql_max_bytes,
            max_field_chars=sql_max_field_chars,
        )
        min_score = self.config.knowledge.min_score if vector_min_score is None else vector_min_score
        self.kb = KnowledgeBase(db, self.kb_encoder, min_score=min_score, language=self.config.knowledge.language)
        self.planner = SqlPlanner(self.config)
        self.answers = DeskAnswers(self.config)
        self.semantic = semantic
        self.ingest_on_start = ingest_on_start
        self.mcp = mcp
        self.cache_dir = cache_dir
        self.ingested: IngestReport | None = None
        self.router: SupportRouter | None = None
        self.gateway: RouteGateway | None = None
        self._plan: Plan[TurnState, TurnState] | None = None

    @property
    def sql(self) -> PostgresTool:
        """The desk's SQL tool (``postgres``)."""
        return self.postgres

    async def start(self) -> None:
        """Load the data (``source = "sql"``), create the desk's state, bring the knowledge base up to date, build
        the router and the plan."""
        config = self.config
        if self.data is self.db:  # one database: the tables are read in its schema, as they are
            if self._demo_data:
                await self.db.ensure_schema()  # the spec's customers and tickets
            config = config.model_copy(update={"database": config.database.model_copy(update={"source": "url"})})
        await prepare(config, self.desk_dir, self.data, self.db)
        await self.postgres.prime()
        if config.knowledge.paths:
            if self.ingest_on_start:
                self.ingested = await ingest(config, self.desk_dir, self.db, self.kb_encoder)
            else:
                await ensure_tables(self.db, self.kb_encoder.dim, config.knowledge.language)
                await calibrated(self.db, self.kb_encoder)  # a desk ingested before the cut-off was calibrated
        if self.semantic is None:
            self.semantic = await asyncio.to_thread(
                partial(desk_embedding_layer, config, self.desk_dir, self.encoder, cache_dir=self.cache_dir)
            )
        self.router = SupportRouter(config, semantic=self.semantic, chat_model=self.chat_model)
        workers = desk_workers(
            config,
            sql=self.postgres,
            planner=self.planner,
            kb=self.kb,
            text_to_sql=TextToSql(self.chat_model, config) if self.chat_model is not None else None,
            mcp=self.mcp,
        )
        # every engine route is a step (the router's output type names all four); a kind the desk lacks is refused
        # by the policy before the plan could route there, and has no worker behind the gateway
        respond = RespondNode(chat_model=self.chat_model, answers=self.answers)
        self._plan = self.build_plan(self.router, workers, routes=present_routes(config), respond=respond)

    def build_plan(
        self, router: SupportRouter, workers: Sequence[Worker], *, routes: Sequence[SupportRoute], respond: RespondNode
    ) -> Plan[TurnState, TurnState]:
        """The desk's plan (:func:`~routegate.apps.support.graph.support_plan`) around ``router``, the tools'
        ``workers`` and the ``respond`` node, with this desk's governance: the tools get their ``flows`` rules, the
        policy allows ``routes`` (each with one ``query`` argument), the gateway (:attr:`gateway`) executes only the
        workers (the LLM route is ``respond``), a tool answers once (no reroute) and a refused decision does what
        ``on_refusal`` says."""
        unknown = sorted(set(self.flows) - {w.name for w in workers})
        if unknown:
            raise ConfigurationError(f"flows names {unknown}; this desk's tools are {[w.name for w in workers]}")
        if self.flows:
            workers = [replace(w, flows=self.flows.get(w.name) or w.flows) for w in workers]
        policy = RoutePolicy(routes, dict.fromkeys(routes, QueryArgs))
        self.gateway = RouteGateway(allow=[w.name for w in workers], registry=workers)
        step = GovernedStep(policy, self.gateway, statuses=("done",))
        router_step = RouterStep(
            router, step, on_refusal=self.on_refusal, max_route_attempts=self.budget.max_route_attempts
        )
        return support_plan(router=router_step, tool=ToolStep(step), respond=respond, budget=self.budget)

    @property
    def plan(self) -> Plan[TurnState, TurnState]:
        """The desk's graph (:func:`~routegate.apps.support.graph.support_plan`), its runtime's plan: its runs start
        through :attr:`runtime` (``desk.runtime.arun(TurnState(turn), deps=turn)``, :meth:`new_turn`)."""
        if self._plan is None:
            raise ConfigurationError(_NOT_STARTED)
        return self._plan

    @property
    def runtime(self) -> DeskRuntime:
        """The desk plan's runtime (:class:`~routegate.apps.support.runtime.DeskRuntime`): a run of it is one turn,
        its result the turn's :class:`TurnResult`."""
        runtime = self.plan.runtime
        if not isinstance(runtime, DeskRuntime):
            raise ConfigurationError("the desk's plan is not a desk runtime's: build it with support_plan(...)")
        return runtime

    async def route(self, message: str) -> RouteChoice:
        """The router's decision alone (no tool runs): the dry run behind ``routegate route``."""
        if self.router is None:
            raise ConfigurationError(_NOT_STARTED)
        return await self.router.route_choice(check_message(message, max_chars=self.max_message_chars))

    # -- SupportDesk (iter and ask: DeskDoors) -------------------------------------------------------------
    def _turn_events(
        self, message: str, session_id: str, tenant: str, history: Sequence[Message] | None
    ) -> AsyncIterator[SupportEvent]:
        """The turn runs as a task feeding the stream (:func:`routegate.core._stream.stream_events`); closing the
        iterator early cancels it. ``tenant``'s database connections are taken in that tenant's place of the
        pool's fair queue (:mod:`~routegate.apps.support.fair_share`); a supplied ``history`` is read by
        :mod:`.supplied` (the user's messages only, bounded, never evidence)."""
        if self._plan is None:
            raise ConfigurationError(_NOT_STARTED)
        supplied = None
        if history is not None:
            turns = -(-self.memory.limit // 2)  # as many user messages as the session's memory keeps
            supplied = read_supplied(history, turns=turns, max_chars=self.max_message_chars)
        return stream_events(lambda emit: self._turn(message, session_id, tenant, emit, supplied), _is_last)

    astream = renamed_method(DeskDoors.iter, "SupportAgent", "astream")

    async def history(self, session_id: str, *, tenant: str = ANONYMOUS) -> list[Message]:
        """The session's last messages, oldest first (read for ``tenant``); :class:`DatabaseUnavailableError` when
        the database is unavailable."""
        check_session_id(session_id)
        try:
            return await self.memory.recent(session_id, tenant=tenant)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(f"the database is unavailable: {type(exc).__name__}") from exc

    async def reset(self, session_id: str, *, tenant: str = ANONYMOUS) -> None:
        """Forget the session's messages, after the session's running turn (if any) has ended: it holds the
        session's lock as a turn does. :class:`DatabaseUnavailableError` when the database is unavailable;
        :class:`~routegate.apps.support.advisory.LockTimeoutError` when the session stays busy for the budget's
        ``max_seconds``."""
        check_session_id(session_id)
        try:
            async with self.memory.hold(session_id, within=self.budget.max_seconds, tenant=tenant) as session:
                await session.clear()
        except LockTimeoutError:
            raise
        except (psycopg.OperationalError, RuntimeFaultError) as exc:  # the database, or the desk's own connections
            raise DatabaseUnavailableError(f"the database is unavailable: {type(exc).__name__}") from exc

    def serialises_sessions(self) -> bool:
        """True: the desk runs a session's turns one at a time itself, in every process over its database (a
        PostgreSQL advisory lock per session, :meth:`MessageStore.hold`); a server adds no lock of its own."""
        return True

    def sessions_held(self) -> int:
        """How many sessions this process holds or waits for (the session locks' names in use)."""
        return len(self.db.locks)

    async def healthy(self) -> bool:
        return self._plan is not None and await self.db.ping() and (self.data is self.db or await self.data.ping())

    def model_health(self) -> ModelHealth | Literal["off"]:
        """The chat model's state: ``ok``, ``degraded``, ``down`` (its breaker is open: turns are answered offline),
        or ``off`` when no model is configured."""
        if self.chat_model is None:
            return "off"
        return self.chat_model.health if isinstance(self.chat_model, ReportsHealth) else "ok"

    # -- one turn -------------------------------------------------------------------------------------------
    new_turn = staticmethod(read_turn)
    """The read-only input of one turn (:func:`~routegate.apps.support.turn.read_turn`): ``message`` read against
    the session's ``history`` or the conversation the caller ``supplied``; its events go to ``emit``; it is
    ``tenant``'s."""

    async def run_turn(self, turn: TurnInput) -> TurnResult:
        """Run the desk's plan on one turn; no memory read or write (see :meth:`iter`). The plan's run is the turn:
        its budget's deadline, its delegation ledger, its phases."""
        final, _ = await self._answer(turn, None)
        return final

    async def _answer(
        self, turn: TurnInput, run: RunContext[TurnInput] | None
    ) -> tuple[TurnResult, Mapping[str, Any] | None]:
        """The turn's result and its tool's observation (what the turn established is read from it), under the
        turn's root span."""

        def attributes() -> dict[str, str]:
            session = hashlib.sha256(turn.session_id.encode()).hexdigest()[:16]  # hashed: never the id
            return {Attr.RUNTIME: "desk", Attr.SESSION: session}

        return await spans_for(tracer()).root("routegate.turn", attributes, self._played(turn, run), _turn_ended)

    async def _played(
        self, turn: TurnInput, run: RunContext[TurnInput] | None
    ) -> tuple[TurnResult, Mapping[str, Any] | None]:
        """The runtime's run of the turn: in ``run``, the turn's own context started when the turn arrived (its
        deadline counts the wait for the session), else in a context of its own starting now."""
        runtime = self.runtime
        state = TurnState(turn)
        # one request scope: the router's embedding of the message is reused by the vector tool
        with request_scope():
            if run is None:
                final = await runtime.arun(state, deps=turn)
            else:
                final = await runtime.arun(state, context=run)
        return final, state.observation

    async def _turn(
        self,
        message: str,
        session_id: str,
        tenant: str,
        emit: Callable[[SupportEvent], None],
        supplied: SuppliedHistory | None = None,
    ) -> None:
        """Memory read, the plan, memory write; the events go to ``emit``, the last one ``final`` or ``error``."""
        with request_scope():
            # the message's embedding (when the turn will need one) is computed while the memory read runs
            if self.router is not None:
                for text in self.router.texts_to_embed(message):
                    self.encoder.prefetch(text)
            # the turn's run starts here: waiting for the session's previous turn counts against its deadline
            run: RunContext[Any] = RunContext.start(None, self.budget)
            try:
                # one turn of a session at a time, in this process and any other on the database
                async with self.memory.hold(session_id, within=self.budget.max_seconds, tenant=tenant) as session:
                    try:
                        # a conversation the caller supplied is read instead of the stored one
                        history = tuple(await session.recent()) if supplied is None else ()
                    except Exception as exc:
                        logger.warning("memory read failed: %s", type(exc).__name__, exc_info=True)
                        emit(_unavailable(exc))
                        return
                    turn = self.new_turn(
                        message, session_id=session_id, history=history, emit=emit, tenant=tenant, supplied=supplied
                    )
                    run.deps = turn
                    await self._run(turn, run, session)
            except LockCapacityError:
                limit = f"{self.budget.max_seconds:g} s"
                emit(TurnError(message=f"no session lock came free within {limit}", code="session_busy"))
            except LockTimeoutError:
                limit = f"{self.budget.max_seconds:g} s"
                emit(TurnError(message=f"the session's previous turn still ran after {limit}", code="session_busy"))
            except Exception as exc:  # taking the session's lock failed: the database
                logger.warning("taking the session failed: %s", type(exc).__name__, exc_info=True)
                emit(_unavailable(exc))

    async def _run(self, turn: TurnInput, run: RunContext[TurnInput], session: SessionHold) -> None:
        try:
            final, observation = await self._answer(turn, run)
            if final.answer:
                messages: list[tuple[Role, str]] = [("user", turn.said), ("assistant", final.answer)]
                context = turn.context(final.route, observation).to_json()
                await session.extend(messages, context=context)
            turn.send(FinalEvent(final))
        except psycopg.OperationalError as exc:
            # the connection to PostgreSQL broke (server shutting down, gone): the database is unavailable, even if
            # a health check that runs a moment later still finds an open connection
            logger.warning("the database failed during the turn: %s", type(exc).__name__, exc_info=True)
            turn.send(_unavailable(exc))
        except Exception as exc:
            turn.send(TurnError(message=fault_message(exc, "the turn", logger), code="internal_error"))


def _turn_ended(root: Span, played: tuple[TurnResult, Mapping[str, Any] | None]) -> None:
    final = played[0]
    end_run(root, final.stop_reason, final.phase, **{Attr.ROUTE: final.route, Attr.RUN_ID: final.run_id})


def _unavailable(exc: Exception) -> TurnError:
    if isinstance(exc, PoolTimeout):
        # every pooled connection stayed busy: the server is saturated, which is not the database being down (the
        # server tells the two apart with its health check, on a connection of its own)
        return TurnError(message="no database connection came free in time (the pool is busy)", code="server_busy")
    return TurnError(message=f"the database is unavailable: {type(exc).__name__}", code="database_unavailable")


def _is_last(event: SupportEvent) -> bool:
    return isinstance(event, FinalEvent | TurnError)
