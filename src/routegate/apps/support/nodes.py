"""The desk's tool nodes as core workers — Postgres Query, Vector Search and External Tool — behind the core
:class:`~routegate.core.RouteGateway` (the tool steps of the desk's plan delegate to them, :mod:`.graph`). The one
place a desk tool is wired:

* ``POSTGRES`` — the offline planner's lookups (:mod:`.planner`), or SQL the model writes from the allowlisted
  schema when a chat model is configured (the planner takes over when it fails), run by the desk's
  :class:`~.postgres_tool.PostgresTool` (the SQL guard, read-only transaction, timeouts, server-side bounds, reader
  role) with the configured tables *and columns* as its allowlist.
* ``VECTOR`` — the knowledge base's best chunks (:class:`~routegate.apps.configured.kb.KnowledgeBase`), each with
  its source file.
* ``EXTERNAL`` — the configured HTTP, MCP or mock tool the message is for (:mod:`.external_tool`).

Each calls its tool once with the validated ``query`` and returns an observation ``{"status": "done", "domain":
<route>, "tool", "call", "result", "fallback"}``. A tool error, a refused query or an empty result is *not* an
exception: the node reports ``fallback`` (``empty``, ``unknown_query``, ``sql_refused:<code>``,
``tool_error:<code>``) and the plan goes on to the Respond node, as the spec's fallback rule says (no retry, no
second tool). When the text-to-SQL model fails, the offline planner writes the query instead, and the observation
says so (``llm_failed``: the model's stop reason; the turn's answer is then the offline one). The direct LLM route
has no tool node: the router routes straight to Respond.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from routegate.apps.configured.config import DeskConfig, ToolConfig
from routegate.apps.configured.routes import family_of
from routegate.apps.support.errors import ToolError
from routegate.apps.support.external_tool import arguments, call_of, run_tool
from routegate.apps.support.planner import Lookup, SqlPlanner
from routegate.apps.support.postgres_tool import PostgresTool, SqlResult
from routegate.apps.support.router import QueryArgs
from routegate.apps.support.sqlguard import SqlRefusedError
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.apps.support.turn import TurnInput, turn_from
from routegate.core import RunContext, Worker
from routegate.errors import RunStopError
from routegate.llm.protocol import ChatMessage, ChatModel

if TYPE_CHECKING:
    from routegate.technique.tools import MCPToolPool


logger = logging.getLogger(__name__)


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
    """What the VECTOR node searches: the desk's knowledge base (:class:`~.vector_tool.KnowledgeBase`)."""

    async def search(self, query: str, top_k: int = 3, *, tenant: str = ANONYMOUS) -> Sequence[_Found]: ...


def vector_worker(search: DocumentSearch, description: str, *, top_k: int = 3) -> Worker:
    """The VECTOR node: the ``top_k`` best documents for the query, ``empty`` when none scores enough."""

    async def vector_node(query: str, run: RunContext[Any] | None = None) -> dict[str, Any]:
        call = {"query": query, "top_k": top_k}
        turn = turn_from(run)  # the gateway passes the turn's run context: whose turn takes the connection
        try:
            documents = await search.search(query, top_k=top_k, tenant=turn.tenant if turn is not None else ANONYMOUS)
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


def resolved_note(turn: TurnInput | None) -> str | None:
    """What a follow-up carried, for a model's prompt: ``the user wrote “…”; read with customer 1, from turn 2``."""
    followup = turn.followup if turn is not None else None
    if followup is None or not followup.resolved:
        return None
    return f"the user wrote “{followup.message}”; read with {followup.carried}"


_TEXT_TO_SQL: Final = """You write one read-only PostgreSQL query for this database.
Tables (nothing else exists; only these columns may be named):
{tables}
Rules: a single SELECT; simple joins only; named placeholders like :id for values taken from the question, with
their values in "params"; no other tables or columns; functions only count, sum, avg, min, max, lower, upper,
coalesce, length, trim, concat. Name columns as alias.column and select only what the question needs.
Answer with one JSON object: {{"query": "<SQL>", "params": {{"name": value}}}}"""


def schema_prompt(config: DeskConfig) -> str:
    lines = []
    for table in config.tables:
        columns = []
        for column in table.columns:
            kind = table.types.get(column, "")
            fk = next((f for f in table.foreign_keys if f.column == column), None)
            ref = f" -> {fk.references}.{fk.ref_column}" if fk else ""
            values = table.filters.get(column)
            listed = f": {' | '.join(repr(v) for v in values)}" if values else ""
            columns.append(f"{column} {kind}{ref}{listed}".strip())
        lines.append(f"  {table.name}({', '.join(columns)})")
    return _TEXT_TO_SQL.format(tables="\n".join(lines))


class TextToSql:
    """With a chat model configured: SQL written by the model from the allowlisted schema (:func:`schema_prompt`),
    checked by the same guard."""

    def __init__(self, chat_model: ChatModel, config: DeskConfig) -> None:
        self._chat_model = chat_model
        self._prompt = schema_prompt(config)

    async def write(
        self, message: str, history: Sequence[str], *, resolved: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The model's SQL and parameters for ``message``; ``history``: the user's earlier messages; ``resolved``
        says what a follow-up's references were resolved to (:func:`resolved_note`)."""
        lines = [f"earlier: {h}" for h in history[-4:]]
        if resolved:
            lines.append(f"resolved from the conversation: {resolved}")
        lines.append(f"question: {message}")
        messages: list[ChatMessage] = [
            {"role": "system", "content": self._prompt},
            {"role": "user", "content": "\n".join(lines)},
        ]
        text = await self._chat_model.complete(messages, json_mode=True)
        try:
            value = json.loads(text)
        except ValueError:
            return text, {}
        if not isinstance(value, dict):
            return text, {}
        query, params = value.get("query"), value.get("params") or {}
        return (query if isinstance(query, str) else ""), (params if isinstance(params, dict) else {})


def desk_workers(
    config: DeskConfig,
    *,
    sql: PostgresTool,
    planner: SqlPlanner,
    kb: DocumentSearch,
    text_to_sql: TextToSql | None = None,
    mcp: MCPToolPool | None = None,
    top_k: int = 3,
) -> tuple[Worker, ...]:
    """The tool nodes of the kinds the desk has. ``mcp``: the pool the MCP tools call through."""

    async def run_lookups(lookups: list[Lookup], tenant: str) -> tuple[Lookup, SqlResult]:
        last: tuple[Lookup, SqlResult] | None = None
        for lookup in lookups:
            result = await sql.run(lookup.query, lookup.params, tenant=tenant)
            last = (lookup, result)
            if result.row_count:
                break
        assert last is not None
        return last

    def call_dict(lookup: Lookup) -> dict[str, Any]:
        named = {"named": {"label": lookup.named[0], "name": lookup.named[1]}} if lookup.named else {}
        return {
            **lookup.to_dict(),
            "focus": list(lookup.focus),
            "looked_for": lookup.looked_for,
            "route": family_of(config, lookup.table),
            **named,
        }

    async def postgres_node(query: str, run: RunContext[Any] | None = None) -> dict[str, Any]:
        turn = turn_from(run)  # the gateway passes the turn's run context: the conversation, whose turn it is
        history = turn.user_messages() if turn is not None else []
        tenant = turn.tenant if turn is not None else ANONYMOUS
        call: dict[str, Any] | None = None
        llm_failed: str | None = None  # the text-to-SQL model's failure, in the observation
        try:
            if text_to_sql is not None:
                try:
                    written, params = await text_to_sql.write(query, history, resolved=resolved_note(turn))
                    call = {"template": "llm", "query": written, "params": params}
                    result = await sql.run(written, params, tenant=tenant)
                    fallback = None if result.row_count or result.truncated else "empty"
                    return observation("POSTGRES", "postgres", call, result.to_dict(), fallback)
                except RunStopError as stop:  # the model failed: the offline planner serves the turn
                    llm_failed = offline_after(stop)
            lookups = planner.plan(query, history)
            if not lookups:
                return observation(
                    "POSTGRES", "postgres", {"query": query}, None, "unknown_query", llm_failed=llm_failed
                )
            call = call_dict(lookups[0])
            lookup, result = await run_lookups(lookups, tenant)
            call = call_dict(lookup)
            if not result.row_count:  # nothing found by any reading: the answer names the named row (else the first)
                first = call_dict(next((each for each in lookups if each.named), lookups[0]))
                call |= {"looked_for": first["looked_for"], "named": first.get("named")}
        except SqlRefusedError as refused:
            return observation("POSTGRES", "postgres", call, None, f"sql_refused:{refused.code}", llm_failed=llm_failed)
        except ToolError as failed:
            return observation("POSTGRES", "postgres", call, None, f"tool_error:{failed.code}", llm_failed=llm_failed)
        fallback = None if result.row_count or result.truncated else "empty"
        return observation("POSTGRES", "postgres", call, result.to_dict(), fallback, llm_failed=llm_failed)

    def named(words: Sequence[str]) -> re.Pattern[str] | None:
        """One pattern finding any of ``words`` as whole words (``None`` for no words), compiled once."""
        alternatives = "|".join(re.escape(w.lower()) for w in words)
        return re.compile(rf"\b(?:{alternatives})\b") if words else None

    tool_routes = [r for r in config.routes if r.kind == "tool"]
    not_covered = [found for r in tool_routes if (found := named(r.not_covered)) is not None]
    keywords = [
        (found, next(t for t in config.tools if t.name == r.target))
        for r in tool_routes
        if (found := named(r.keywords))
    ]

    def pick_tool(query: str) -> ToolConfig | str:
        """The tool the message is for, or the fallback when no tool is called: ``empty`` when it names what a
        tool route has ``not_covered`` (the tool has nothing on it); else the tool whose route's keywords the
        message has; the only tool when there is one; else ``unknown_query`` (a message the router sent to the
        tools that names none of them is not guessed at)."""
        text = query.lower()
        if any(words.search(text) for words in not_covered):
            return "empty"
        for words, tool in keywords:
            if words.search(text):
                return tool
        return config.tools[0] if len(config.tools) == 1 else "unknown_query"

    async def external_node(query: str) -> dict[str, Any]:
        tool = pick_tool(query)
        if isinstance(tool, str):
            return observation("EXTERNAL", "external", {"query": query}, None, tool)
        args = arguments(tool, query)
        if args is None:
            return observation("EXTERNAL", "external", {"tool": tool.name, "query": query}, None, "unknown_query")
        call = call_of(tool, args)
        record = {"tool": tool.name, "args": dict(call.args), "url": call.url, "mock": tool.mock is not None}
        try:
            answer = await run_tool(tool, call, mcp=mcp)
        except ToolError as failed:
            return observation("EXTERNAL", "external", record, None, f"tool_error:{failed.code}")
        return observation("EXTERNAL", "external", record, answer, None)

    workers: list[Worker] = []
    if config.tables:
        tables = ", ".join(t.name for t in config.tables)
        workers.append(Worker("POSTGRES", postgres_node, f"Records from PostgreSQL: {tables}", QueryArgs))
    if any(r.kind == "kb" for r in config.routes):
        workers.append(vector_worker(kb, "Passages of the help documents", top_k=top_k))
    if config.tools:
        workers.append(Worker("EXTERNAL", external_node, "; ".join(t.description for t in config.tools), QueryArgs))
    return tuple(workers)
