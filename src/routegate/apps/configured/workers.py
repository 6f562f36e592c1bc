"""The configured desk's tool nodes as core workers, behind the same gateway as the built-in desk's:

* ``POSTGRES`` — the offline planner's lookups (:mod:`.planner`), or SQL the model writes from the allowlisted
  schema when a chat model is configured (the planner takes over when it fails), run by :class:`DeskSqlTool`:
  the built-in Postgres tool (the SQL guard, read-only transaction, timeouts, server-side bounds, reader role)
  with the configured tables *and columns* as its allowlist.
* ``VECTOR`` — the knowledge base's best chunks (:mod:`.kb`), each with its source file.
* ``EXTERNAL`` — the configured HTTP or MCP tool the message is for (:mod:`.tools`).

Each returns the built-in observation ``{"status": "done", "domain", "tool", "call", "result", "fallback"}``; a
refused query, a failed tool or an empty result is a ``fallback`` the Respond node words, never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from routegate.apps.configured._stars import expand_stars
from routegate.apps.configured.config import DeskConfig, ToolConfig
from routegate.apps.configured.kb import KnowledgeBase
from routegate.apps.configured.planner import Lookup, SqlPlanner
from routegate.apps.configured.router import family_of
from routegate.apps.configured.tools import arguments, call_of, run_tool
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.nodes import observation, offline_after, vector_worker
from routegate.apps.support.postgres_tool import PostgresTool, SqlResult
from routegate.apps.support.router import QueryArgs
from routegate.apps.support.sqlguard import SqlRefusedError
from routegate.apps.support.turn import turn_from
from routegate.core import RunContext, Worker
from routegate.errors import RunStopError
from routegate.llm.protocol import ChatMessage, ChatModel

if TYPE_CHECKING:
    from routegate.technique.tools import MCPToolPool


class DeskSqlTool(PostgresTool):
    """The built-in Postgres tool whose guard allows only the configured columns of the configured tables."""

    def __init__(self, db: SupportDatabase, config: DeskConfig, **bounds: int) -> None:
        super().__init__(db, **bounds)
        self.columns = config.readable_columns()

    async def _readable_columns(self) -> dict[str, tuple[str, ...]]:
        return dict(self.columns)  # checked against the catalog at start (database.prepare)

    async def run(self, query: str, params: Mapping[str, Any] | None = None) -> SqlResult:
        """The built-in tool's run, after ``*`` is expanded to the readable columns (:mod:`._stars`)."""
        expanded = expand_stars(query, self.columns)
        return await super().run(expanded if isinstance(expanded, str) else query, params)


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


class DeskTextToSql:
    """SQL written by the chat model from the allowlisted schema; the same guard checks it."""

    def __init__(self, chat_model: ChatModel, config: DeskConfig) -> None:
        self._chat_model = chat_model
        self._prompt = schema_prompt(config)

    async def write(self, message: str, history: Sequence[str]) -> tuple[str, dict[str, Any]]:
        context = "\n".join(f"earlier: {h}" for h in history[-4:])
        messages: list[ChatMessage] = [
            {"role": "system", "content": self._prompt},
            {"role": "user", "content": f"{context}\nquestion: {message}".strip()},
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
    sql: DeskSqlTool,
    planner: SqlPlanner,
    kb: KnowledgeBase,
    text_to_sql: DeskTextToSql | None = None,
    mcp: MCPToolPool | None = None,
    top_k: int = 3,
) -> tuple[Worker, ...]:
    """The tool nodes of the kinds the desk has. ``mcp``: the pool the MCP tools call through."""

    async def run_lookups(lookups: list[Lookup]) -> tuple[Lookup, SqlResult]:
        last: tuple[Lookup, SqlResult] | None = None
        for lookup in lookups:
            result = await sql.run(lookup.query, lookup.params)
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
        turn = turn_from(run)
        history = turn.user_messages() if turn is not None else []
        call: dict[str, Any] | None = None
        llm_failed: str | None = None  # the text-to-SQL model's failure, in the observation
        try:
            if text_to_sql is not None:
                try:
                    written, params = await text_to_sql.write(query, history)
                    call = {"template": "llm", "query": written, "params": params}
                    result = await sql.run(written, params)
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
            lookup, result = await run_lookups(lookups)
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

    def named(words: Sequence[str], text: str) -> bool:
        return any(re.search(rf"\b{re.escape(w.lower())}\b", text) for w in words)

    def pick_tool(query: str) -> ToolConfig | str:
        """The tool the message is for, or the fallback when no tool is called: ``empty`` when it names what a
        tool route has ``not_covered`` (the tool has nothing on it); else the tool whose route's keywords the
        message has; the only tool when there is one; else ``unknown_query`` (a message the router sent to the
        tools that names none of them is not guessed at)."""
        text = query.lower()
        routes = [r for r in config.routes if r.kind == "tool"]
        if any(named(r.not_covered, text) for r in routes):
            return "empty"
        for route in routes:
            if named(route.keywords, text):
                return next(t for t in config.tools if t.name == route.target)
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
