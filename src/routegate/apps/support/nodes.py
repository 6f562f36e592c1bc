"""The graph's tool nodes as core workers: Postgres Query, Vector Search and External Tool.

They sit behind the core :class:`~routegate.core.RouteGateway` (the tool steps of the desk's plan delegate to
them, :mod:`.graph`). Each node calls its tool once with the validated ``query`` and returns an observation
``{"status": "done", "domain": <route>, "tool", "call", "result", "fallback"}``. A tool error, a refused query or
an empty result is *not* an exception: the node reports ``fallback`` (``empty``, ``unknown_query``,
``sql_refused:<code>``, ``tool_error:<code>``) and the plan goes on to the Respond node, as the spec's fallback
rule says (no retry, no second tool). When the text-to-SQL model fails, the offline template writes the query
instead, and the observation says so (``llm_failed``: the model's stop reason; the turn's answer is then the
offline one). The direct LLM route has no tool node: the router routes straight to Respond.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from routegate.apps.support.errors import ToolError
from routegate.apps.support.external_tool import ExternalTool, detect_type
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.router import QueryArgs
from routegate.apps.support.sql_templates import SqlCall, select_query
from routegate.apps.support.sqlguard import SqlRefusedError
from routegate.apps.support.turn import TurnInput, turn_from
from routegate.apps.support.vector_tool import VectorTool
from routegate.core import RunContext, Worker
from routegate.errors import RunStopError
from routegate.llm.protocol import ChatMessage, ChatModel

logger = logging.getLogger(__name__)

TEXT_TO_SQL_PROMPT: Final = """You write one read-only PostgreSQL query for a customer-support database.
Tables (nothing else exists):
  customers(id integer, name text, city text)
  tickets(id integer, customer_id integer -> customers.id, issue text, status text: 'open' | 'closed')
Rules: a single SELECT; simple joins only; named placeholders like :customer_id for values taken from the
question, with their values in "params"; no other tables, no functions except count, sum, avg, min, max,
lower, upper, coalesce, length, trim, concat.
Name only the columns listed (alias.column); select only the columns the question needs.
Answer with one JSON object: {"query": "<SQL>", "params": {"name": value}}"""


def observation(
    route: str,
    tool: str,
    call: Mapping[str, Any] | None,
    result: Any,
    fallback: str | None,
    *,
    llm_failed: str | None = None,
) -> dict[str, Any]:
    """A tool node's observation: ``done``, with the call, the result and the fallback (``None``: an answer);
    ``llm_failed`` (only when given) is the stop reason of the model whose work the offline path did instead."""
    found = {"status": "done", "domain": route, "tool": tool, "call": call, "result": result, "fallback": fallback}
    if llm_failed is not None:
        found["llm_failed"] = llm_failed
    return found


class _Found(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class DocumentSearch(Protocol):
    """What the VECTOR node searches: the help articles (:class:`VectorTool`) or a configured desk's knowledge base."""

    async def search(self, query: str, top_k: int = 3) -> Sequence[_Found]: ...


def vector_worker(search: DocumentSearch, description: str, *, top_k: int = 3) -> Worker:
    """The VECTOR node: the ``top_k`` best documents for the query, ``empty`` when none scores enough."""

    async def vector_node(query: str) -> dict[str, Any]:
        call = {"query": query, "top_k": top_k}
        try:
            documents = await search.search(query, top_k=top_k)
        except ToolError as failed:
            return observation("VECTOR", "vector", call, None, f"tool_error:{failed.code}")
        result = {"documents": [d.to_dict() for d in documents]}
        return observation("VECTOR", "vector", call, result, None if documents else "empty")

    return Worker("VECTOR", vector_node, description, QueryArgs)


def offline_after(stop: RunStopError) -> str:
    """The text-to-SQL model failed (``stop``): the offline path writes the query. Returns the stop reason, for the
    observation's ``llm_failed`` (the turn's answer is then the offline one)."""
    logger.info("text-to-SQL failed (%s); the offline path writes the query", stop.stop_reason)
    return stop.stop_reason


class TextToSql:
    """With a chat model configured: SQL written by the model from the schema, checked by the same guard."""

    def __init__(self, chat_model: ChatModel) -> None:
        self._chat_model = chat_model

    async def write(self, message: str, history: Sequence[str], *, resolved: str | None = None) -> SqlCall:
        """The model's SQL for ``message``; ``resolved`` says what a follow-up's references were resolved to."""
        lines = [f"earlier: {h}" for h in history[-4:]]
        if resolved:
            lines.append(f"resolved from the conversation: {resolved}")
        lines.append(f"question: {message}")
        messages: list[ChatMessage] = [
            {"role": "system", "content": TEXT_TO_SQL_PROMPT},
            {"role": "user", "content": "\n".join(lines)},
        ]
        text = await self._chat_model.complete(messages, json_mode=True)
        try:
            value = json.loads(text)
        except ValueError:
            return SqlCall("llm", text, {})
        if not isinstance(value, dict):
            return SqlCall("llm", text, {})
        query, params = value.get("query"), value.get("params") or {}
        return SqlCall("llm", query if isinstance(query, str) else "", params if isinstance(params, dict) else {})


def resolved_note(turn: TurnInput | None) -> str | None:
    """What a follow-up carried, for a model's prompt: ``the user wrote “…”; read with customer 1, from turn 2``."""
    followup = turn.followup if turn is not None else None
    if followup is None or not followup.resolved:
        return None
    return f"the user wrote “{followup.message}”; read with {followup.carried}"


def build_tool_workers(
    *,
    postgres: PostgresTool,
    vector: VectorTool,
    external: ExternalTool,
    text_to_sql: TextToSql | None = None,
    top_k: int = 3,
) -> tuple[Worker, ...]:
    """The three tool nodes, named after the routes they serve."""

    async def postgres_node(query: str, run: RunContext[Any] | None = None) -> dict[str, Any]:
        turn = turn_from(run)  # the gateway passes the turn's run context: the conversation resolves "she"
        history = turn.user_messages() if turn is not None else []
        call: SqlCall | None = None
        llm_failed: str | None = None
        try:
            if text_to_sql is not None:
                try:
                    call = await text_to_sql.write(query, history, resolved=resolved_note(turn))
                except RunStopError as stop:  # the model failed: the offline template serves the turn
                    llm_failed = offline_after(stop)
                    call = select_query(query, history)
            else:
                call = select_query(query, history)
            result = await postgres.run(call.query, call.params)
        except SqlRefusedError as refused:
            called = call.to_dict() if call else None
            return observation(
                "POSTGRES", "postgres", called, None, f"sql_refused:{refused.code}", llm_failed=llm_failed
            )
        except ToolError as failed:
            called = call.to_dict() if call else None
            return observation("POSTGRES", "postgres", called, None, f"tool_error:{failed.code}", llm_failed=llm_failed)
        except RunStopError as stop:  # the text-to-SQL model failed: the database was never asked
            logger.warning("text-to-SQL failed: %s", stop.stop_reason)
            return observation("POSTGRES", "postgres", None, None, f"llm_failed:{stop.stop_reason}")
        fallback = None if result.row_count or result.truncated else "empty"
        return observation("POSTGRES", "postgres", call.to_dict(), result.to_dict(), fallback, llm_failed=llm_failed)

    async def external_node(query: str) -> dict[str, Any]:
        kind = detect_type(query)
        if kind is None:
            return observation("EXTERNAL", "external", {"type": None, "query": query}, None, "unknown_query")
        call = {"type": kind, "query": query}
        answer = external.call(kind, query)
        if answer is None:
            return observation("EXTERNAL", "external", call, None, "empty")
        return observation("EXTERNAL", "external", call, answer.to_dict(), None)

    return (
        Worker("POSTGRES", postgres_node, "Customer and ticket data from PostgreSQL", QueryArgs),
        vector_worker(vector, "Help articles by semantic search", top_k=top_k),
        Worker("EXTERNAL", external_node, "Mock external API (weather, crypto)", QueryArgs),
    )
