"""What the desk's statements leave on a pooled connection: nothing (no open transaction, no role, no read-only,
no timeout), whatever way the SQL tool's query ended; and the one-statement memory write's edge cases."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest
from psycopg.pq import TransactionStatus

from routegate.apps.support import postgres_tool as postgres_tool_module
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.memory import MessageStore
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.sqlguard import CheckedQuery
from routegate.embed import MiniLMEncoder

pytestmark = pytest.mark.integration


@pytest.fixture
async def one_connection_db(
    pg_url: str, encoder: MiniLMEncoder, seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]]
) -> AsyncIterator[SupportDatabase]:
    """A pool of exactly one connection, so every statement of a test runs on the same session."""
    async with seeded_database(pg_url, encoder.dim, max_size=1) as database:
        yield database


async def _session_state(db: SupportDatabase) -> tuple[TransactionStatus, dict[str, object]]:
    async with db.connection() as conn:
        status = conn.info.transaction_status
        cur = await conn.execute(
            "SELECT current_user = session_user AS own_role, current_setting('transaction_read_only') AS ro,"
            " current_setting('statement_timeout') AS timeout, current_setting('synchronous_commit') AS sync"
        )
        row = await cur.fetchone()
    assert row is not None
    return status, dict(row)


CLEAN = {"own_role": True, "ro": "off", "timeout": "0", "sync": "on"}  # durable commits by default


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("SELECT id FROM customers ORDER BY id", None),
        ("DELETE FROM tickets", "database_error"),  # refused by the read-only transaction / the role
        ("SELECT * FROM support_messages", "database_error"),  # no privilege for the reader role
        ("SELECT pg_sleep(5)", "statement_timeout"),
        ("SELECT nosuchcolumn FROM customers", "database_error"),
    ],
)
async def test_the_sql_tool_leaves_the_connection_as_it_found_it(
    one_connection_db: SupportDatabase, monkeypatch: pytest.MonkeyPatch, query: str, code: str | None
) -> None:
    # the guard would refuse most of these before the database sees them: take it away to test the layer below
    monkeypatch.setattr(
        postgres_tool_module,
        "check_sql",
        lambda q, p=None, **_: CheckedQuery(sql=str(q), params=None, tables=frozenset()),
    )
    tool = PostgresTool(one_connection_db, statement_timeout_ms=100)
    if code is None:
        assert (await tool.run(query)).row_count > 0
    else:
        with pytest.raises(ToolError) as failed:
            await tool.run(query)
        assert failed.value.code == code
    status, state = await _session_state(one_connection_db)
    assert status == TransactionStatus.IDLE
    assert state == CLEAN
    assert (await tool.run("SELECT name FROM customers WHERE id = 1")).row_count == 1  # and it still works


async def test_an_empty_extend_writes_nothing(db: SupportDatabase) -> None:
    store = MessageStore(db)
    await store.extend("s", [])
    assert await store.recent("s") == []


async def test_more_messages_than_the_limit_at_once_keep_the_last_ones_in_order(db: SupportDatabase) -> None:
    store = MessageStore(db, limit=4)
    await store.extend("s", [("user", "old 1"), ("assistant", "old 2")])
    await store.extend("s", [("user" if i % 2 else "assistant", f"new {i}") for i in range(7)])
    assert [m.content for m in await store.recent("s")] == ["new 3", "new 4", "new 5", "new 6"]
    async with db.connection() as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM support_messages WHERE session_id = 's'")
        assert await cur.fetchone() == {"n": 4}


async def test_each_write_trims_to_the_limit_across_sessions(db: SupportDatabase) -> None:
    store = MessageStore(db, limit=3)
    for i in range(5):
        await store.extend("a", [("user", f"a{i}"), ("assistant", f"a{i}!")])
        await store.append("b", "user", f"b{i}")
    assert [m.content for m in await store.recent("a")] == ["a3!", "a4", "a4!"]
    assert [m.content for m in await store.recent("b")] == ["b2", "b3", "b4"]


@pytest.mark.parametrize(
    ("setting", "value"),
    [("search_path", "pg_catalog"), ("statement_timeout", "1"), ("synchronous_commit", "off")],
)
async def test_a_query_past_the_guard_cannot_change_the_connections_settings(
    one_connection_db: SupportDatabase, monkeypatch: pytest.MonkeyPatch, setting: str, value: str
) -> None:
    """The tool's transaction is rolled back: a session-level change made by its query (the guard refuses
    ``set_config``; here it is switched off) does not reach the desk's next statements on the pooled connection —
    a search path pointed elsewhere would send the next history read or memory write to another schema."""
    monkeypatch.setattr(
        postgres_tool_module,
        "check_sql",
        lambda q, p=None, **_: CheckedQuery(sql=str(q), params=None, tables=frozenset()),
    )
    tool = PostgresTool(one_connection_db)
    async with one_connection_db.connection() as conn:
        before = await (await conn.execute("SELECT current_setting(%s) AS v", (setting,))).fetchone()
    await tool.run(f"SELECT set_config('{setting}', '{value}', false) AS changed")
    async with one_connection_db.connection() as conn:
        after = await (await conn.execute("SELECT current_setting(%s) AS v", (setting,))).fetchone()
    assert after == before
    status, state = await _session_state(one_connection_db)
    assert status == TransactionStatus.IDLE and state == CLEAN
