"""What a desk turn costs in round trips to PostgreSQL, read from libpq's own protocol trace (``PQtrace``) of the
connections the desk uses: a round trip is the client waiting for the server (a server message after a client
message on one connection), a statement a ``CommandComplete`` or ``ErrorResponse`` the server sent.

* the SQL tool: one round trip and four statements per call of a query it has seen (``BEGIN READ ONLY``, the
  settings statement, the bounded query and ``ROLLBACK`` in one pipeline, one ``Sync``), two round trips for a
  new one (its columns are described first, in the same transaction);
* a rule-routed SQL question: two round trips on the pool (the SQL tool, the memory write) and the session lock's
  take, with the history read in its statement, on the locks' own connection (``test_support_history_with_lock.py``);
  a follow-up that comes while the session's lock is still held reads no history (``test_support_history_kept.py``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq

from routegate.apps.support import postgres_tool as postgres_tool_module
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.errors import ToolError
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder

pytestmark = pytest.mark.integration


@dataclass
class Exchange:
    """What one connection's trace shows."""

    round_trips: int = 0
    statements: int = 0
    sent: str = ""  # the client's messages, as traced


def read_trace(path: Path) -> Exchange:
    out = Exchange()
    previous = ""
    lines = path.read_text(errors="replace").splitlines()
    for line in lines:
        fields = line.split("\t")
        if len(fields) < 3 or fields[0] not in ("F", "B"):
            continue
        if fields[0] == "B" and previous == "F":
            out.round_trips += 1
        if fields[0] == "B" and fields[2] in ("CommandComplete", "ErrorResponse"):
            out.statements += 1
        previous = fields[0]
    out.sent = "\n".join(line for line in lines if line.startswith("F"))
    return out


@contextmanager
def traced(conn: psycopg.AsyncConnection[Any], path: Path) -> Iterator[Callable[[], Exchange]]:
    """Trace ``conn`` while the block runs; call the yielded function afterwards for what was exchanged."""
    conn.pgconn.trace(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
    try:
        yield lambda: read_trace(path)
    finally:
        conn.pgconn.untrace()  # flushes


@asynccontextmanager
async def one_connection(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]], pg_url: str, dim: int
) -> AsyncIterator[tuple[SupportDatabase, psycopg.AsyncConnection[Any]]]:
    """A seeded schema whose pool holds one connection, and that connection (every query of the desk uses it)."""
    async with seeded_database(pg_url, dim, min_size=1, max_size=1) as db:
        async with db.connection() as conn:
            pass
        yield db, conn


async def test_a_query_the_tool_has_seen_costs_one_round_trip(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
    tmp_path: Path,
) -> None:
    query = "SELECT id, status FROM tickets WHERE id = :id"
    async with one_connection(seeded_database, pg_url, encoder.dim) as (db, conn):
        tool = PostgresTool(db)
        await tool.prime()
        with traced(conn, tmp_path / "first.trace") as first:
            one = await tool.run(query, {"id": 1})
        # psycopg forgets its prepared statements on a ROLLBACK and deallocates them with its next statement: the
        # seeding's, once, here
        await tool.run(query, {"id": 3})
        with traced(conn, tmp_path / "again.trace") as again:
            two = await tool.run(query, {"id": 2})
    assert [r["id"] for r in one.rows] == [1] and [r["id"] for r in two.rows] == [2]  # the parameters still count
    assert set(two.rows[0]) == {"id", "status"}
    described = first()
    assert described.round_trips == 2  # described, then run
    assert described.sent.count("Sync") == 1, described.sent  # in one transaction
    seen = again()
    assert seen.round_trips == 1, seen.sent
    assert seen.statements == 4 and seen.sent.count("Sync") == 1, seen.sent
    # the guarantees travel in the same exchange, in order: read-only, timeout, pinned path, role, query, rollback
    settings = ("BEGIN READ ONLY", "statement_timeout", "search_path", "rg_rows", "ROLLBACK")
    if db.reader_role is not None:
        settings = (*settings[:3], "'role'", *settings[3:])
    order = [seen.sent.index(s) for s in settings]
    assert order == sorted(order), seen.sent


async def test_queries_beyond_the_kept_number_keep_their_own_columns(
    db: SupportDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_tool_module, "PLAN_CACHE_SIZE", 2)
    tool = PostgresTool(db)
    queries = {
        "SELECT id FROM customers WHERE id = 1": {"id": 1},
        "SELECT name FROM customers WHERE id = 1": {"name": "John Doe"},
        "SELECT city, id FROM customers WHERE id = 1": {"city": "New York", "id": 1},
    }
    for _ in range(3):
        for query, row in queries.items():
            assert (await tool.run(query)).rows == (row,)


async def test_a_rule_routed_sql_question_costs_two_round_trips_on_the_pool(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
    semantic: ExampleEmbeddingLayer,
    tmp_path: Path,
) -> None:
    async with one_connection(seeded_database, pg_url, encoder.dim) as (db, conn):
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        session = f"trips-{uuid.uuid4().hex[:8]}"
        await desk.ask("What is the status of ticket 1?", session_id=session)  # the query is seen once
        with traced(conn, tmp_path / "turn.trace") as turn:
            # another session: its history is read, with its lock's take (a follow-up of a session whose lock this
            # process still holds reads none: test_support_history_kept.py)
            result = await desk.ask("What is the status of ticket 2?", session_id=f"{session}-b")
    assert (result.route, result.stop_reason) == ("POSTGRES", "success")
    seen = turn()
    # the SQL tool's one pipeline, the memory write (the session lock and the history read are on the locks' own
    # connection, in one statement)
    assert seen.round_trips == 2, seen.sent
    assert seen.sent.count("Sync") == 2
    assert seen.statements == 5, seen.sent  # the tool's four, the memory write


async def test_a_seen_query_that_fails_at_run_time_leaves_the_connection_clean(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
) -> None:
    query = "SELECT 10 / (id - 1) AS ratio FROM customers WHERE id = :id"
    async with one_connection(seeded_database, pg_url, encoder.dim) as (db, conn):
        tool = PostgresTool(db)
        assert (await tool.run(query, {"id": 2})).rows == ({"ratio": 10},)
        with pytest.raises(ToolError) as failed:  # the pipeline's query fails: its rollback is skipped by the server
            await tool.run(query, {"id": 1})
        assert failed.value.code == "database_error" and "division by zero" in str(failed.value)
        assert conn.info.transaction_status == pq.TransactionStatus.IDLE
        assert (await tool.run(query, {"id": 3})).rows == ({"ratio": 5},)
        async with db.connection() as again:  # the pool's one connection, outside any transaction, not read-only
            cursor = await again.execute("SELECT current_setting('transaction_read_only') AS ro, current_user AS who")
            row = await cursor.fetchone()
        assert row is not None and row["ro"] == "off" and row["who"] != db.reader_role
