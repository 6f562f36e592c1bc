"""The support desk: the graph Router → (Postgres | Vector | External | LLM) → Respond, on the core runtime.

Wiring only. The graph is a core :class:`~routegate.core.RoutingAgent`: the router node is its router (every
decision passes the core policy boundary, then the gateway's execution allowlist), the four route nodes are its
workers, the Respond node is its finalizer. The budget allows one route attempt and one delegation: no retry
and no second tool, as the spec requires. Memory (the last 10 messages, in PostgreSQL) is read before the run,
passed to every node, and written after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from routegate.apps.support.contracts import (
    ROUTES,
    AnswerToken,
    Message,
    SupportEvent,
    SupportRoute,
    TurnError,
    TurnResult,
)
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.external_tool import ExternalTool
from routegate.apps.support.memory import MAX_MESSAGE_CHARS, MEMORY_LIMIT, MessageStore, check_session_id
from routegate.apps.support.nodes import TextToSql, build_nodes
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.respond import RespondNode, announce, tokens_of
from routegate.apps.support.router import RouteChoice, SupportRouter
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer
from routegate.apps.support.turn import CURRENT_TURN, Turn
from routegate.apps.support.vector_tool import DEFAULT_MIN_SCORE, VectorTool
from routegate.core import Budget, RoutingAgent, RunResult
from routegate.embed import Encoder
from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.llm.protocol import ChatModel

logger = logging.getLogger(__name__)

SUPPORT_BUDGET: Final = Budget(max_route_attempts=1, max_delegations=1, max_seconds=60.0)


class SupportAgent:
    """The :class:`~routegate.apps.support.contracts.SupportDesk` implementation. Call :meth:`start` first."""

    def __init__(
        self,
        *,
        db: SupportDatabase,
        encoder: Encoder,
        chat_model: ChatModel | None = None,
        budget: Budget = SUPPORT_BUDGET,
        memory_limit: int = MEMORY_LIMIT,
        row_cap: int = 100,
        statement_timeout_ms: int = 2000,
        vector_min_score: float = DEFAULT_MIN_SCORE,
        semantic: EmbeddingLayer | None = None,
    ) -> None:
        self.db = db
        self.encoder = encoder
        self.chat_model = chat_model
        self.budget = budget
        self.memory = MessageStore(db, limit=memory_limit)
        self.postgres = PostgresTool(db, row_cap=row_cap, statement_timeout_ms=statement_timeout_ms)
        self.vector = VectorTool(db, encoder, min_score=vector_min_score)
        self.external = ExternalTool()
        self.semantic = semantic
        self.router: SupportRouter | None = None
        self._agent: RoutingAgent | None = None

    async def start(self) -> None:
        """Create the schema and seed data if needed, embed the articles and the route examples (once)."""
        await self.db.ensure_schema(embedding_dim=self.encoder.dim)
        await self.vector.index()
        if self.semantic is None:
            self.semantic = await asyncio.to_thread(ExampleEmbeddingLayer, self.encoder)
        semantic: EmbeddingLayer = self.semantic
        self.router = SupportRouter(semantic=semantic, chat_model=self.chat_model)
        nodes = build_nodes(
            postgres=self.postgres,
            vector=self.vector,
            external=self.external,
            text_to_sql=TextToSql(self.chat_model) if self.chat_model is not None else None,
        )
        self._agent = RoutingAgent(
            workers=nodes,
            router=self.router,
            finalizer=RespondNode(chat_model=self.chat_model),
            budget=self.budget,
            name="support-desk",
        )

    @property
    def agent(self) -> RoutingAgent:
        if self._agent is None:
            raise ConfigurationError("SupportAgent.start() must be awaited before the desk is used")
        return self._agent

    async def route(self, message: str) -> RouteChoice:
        """The router's decision alone (no tool runs): the dry run behind ``routegate route``."""
        if self.router is None:
            raise ConfigurationError("SupportAgent.start() must be awaited before the desk is used")
        return await self.router.choose(message)

    # -- SupportDesk ---------------------------------------------------------------------------------------
    async def astream(self, message: str, *, session_id: str) -> AsyncIterator[SupportEvent]:
        """One turn as events: ``route`` → ``tool`` (not on the LLM route) → ``token``* → ``final`` | ``error``."""
        problem = _check_input(message, session_id)
        if problem is not None:
            yield problem
            return
        agent = self.agent
        try:
            history = tuple(await self.memory.recent(session_id))
        except Exception as exc:
            logger.warning("memory read failed: %s", type(exc).__name__, exc_info=True)
            yield TurnError(message=f"the database is unavailable: {type(exc).__name__}", code="database_unavailable")
            return
        queue: asyncio.Queue[SupportEvent | None] = asyncio.Queue()
        turn = Turn(session_id=session_id, message=message, history=history, emit=queue.put_nowait)
        reset = CURRENT_TURN.set(turn)
        try:
            task = asyncio.create_task(self._run(agent, turn, queue))
        finally:
            CURRENT_TURN.reset(reset)
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def ask(self, message: str, *, session_id: str) -> TurnResult:
        """One turn to its end. Raises :class:`RuntimeFaultError` when the turn ends with an ``error`` event."""
        final: TurnResult | None = None
        async for event in self.astream(message, session_id=session_id):
            if isinstance(event, TurnResult):
                final = event
            elif isinstance(event, TurnError):
                raise RuntimeFaultError(f"{event.code}: {event.message}")
        if final is None:  # pragma: no cover - astream always ends with final or error
            raise RuntimeFaultError("the turn ended without a result")
        return final

    async def history(self, session_id: str) -> list[Message]:
        return await self.memory.recent(check_session_id(session_id))

    async def reset(self, session_id: str) -> None:
        await self.memory.clear(check_session_id(session_id))

    async def healthy(self) -> bool:
        return self._agent is not None and await self.db.ping()

    # -- one turn -------------------------------------------------------------------------------------------
    async def _run(self, agent: RoutingAgent, turn: Turn, queue: asyncio.Queue[SupportEvent | None]) -> None:
        started = time.perf_counter()
        try:
            result = await agent.arun(turn.message, context={"turn": turn, "history": turn.history})
            final = self._final(turn, result, started)
            if final.answer:
                await self.memory.extend(turn.session_id, [("user", turn.message), ("assistant", final.answer)])
            queue.put_nowait(final)
        except Exception as exc:
            logger.warning("support turn failed: %s", type(exc).__name__, exc_info=True)
            queue.put_nowait(TurnError(message=f"the turn failed: {type(exc).__name__}: {exc}", code="internal_error"))
        finally:
            queue.put_nowait(None)

    def _final(self, turn: Turn, result: RunResult, started: float) -> TurnResult:
        choice = turn.choice
        route: SupportRoute = _route_of(result.selected_route) or (choice.route if choice else "LLM")
        trace: list[Mapping[str, Any]] = []
        if choice is not None:
            trace.append({"node": "router", **choice.to_dict()})
        trace += [{"node": "core", **entry.to_dict()} for entry in result.trace]
        if turn.tool is not None:
            trace.append({"node": turn.tool, "call": dict(turn.call or {}), "fallback": turn.fallback})
        trace += turn.notes
        if result.ok and result.answer is not None:
            answer = result.answer
        else:
            # the run stopped before the Respond node finished (deadline, refused decision): answer safely
            announce(turn, route)
            answer = f"Sorry, I couldn't finish answering that ({result.stop_reason}). Please try again."
            if turn.fallback is None:
                turn.fallback = f"stopped:{result.stop_reason}"
            for token in tokens_of(answer):
                turn.send(AnswerToken(token))
            trace.append({"node": "respond", "mode": "composer", "stopped": result.stop_reason, "why": result.message})
        return TurnResult(
            session_id=turn.session_id,
            route=route,
            answer=answer,
            stop_reason=result.stop_reason,
            fallback=turn.fallback,
            trace=tuple(trace),
            latency_ms=(time.perf_counter() - started) * 1000.0,
        )


def _route_of(value: str | None) -> SupportRoute | None:
    for route in ROUTES:
        if route == value:
            return route
    return None


def _check_input(message: object, session_id: object) -> TurnError | None:
    try:
        check_session_id(session_id)
    except ConfigurationError as exc:
        return TurnError(message=str(exc), code="bad_session_id")
    if not isinstance(message, str) or not message.strip():
        return TurnError(message="the message is empty: send a non-blank text", code="empty_message")
    if len(message) > MAX_MESSAGE_CHARS:
        return TurnError(
            message=f"the message has {len(message)} characters, over the {MAX_MESSAGE_CHARS} limit",
            code="message_too_long",
        )
    return None
