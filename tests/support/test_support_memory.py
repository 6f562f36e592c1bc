"""Memory: exactly the last 10 messages per session, in PostgreSQL, kept across a server restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.errors import InvalidSessionIdError
from routegate.apps.support.memory import MessageStore
from routegate.errors import ConfigurationError

pytestmark = pytest.mark.integration


async def test_keeps_exactly_the_last_ten(db: SupportDatabase) -> None:
    store = MessageStore(db)
    for i in range(13):
        await store.append("s1", "user" if i % 2 == 0 else "assistant", f"message {i}")
    recent = await store.recent("s1")
    assert [m.content for m in recent] == [f"message {i}" for i in range(3, 13)]
    assert [m.role for m in recent][:2] == ["assistant", "user"]
    async with db.connection() as conn:
        stored = await (
            await conn.execute("SELECT count(*) AS n FROM support_messages WHERE session_id = 's1'")
        ).fetchone()
    assert stored == {"n": 10}


async def test_sessions_are_separate_and_clear_works(db: SupportDatabase) -> None:
    store = MessageStore(db)
    await store.extend("a", [("user", "hi"), ("assistant", "hello")])
    await store.append("b", "user", "other")
    assert [m.content for m in await store.recent("a")] == ["hi", "hello"]
    assert [m.content for m in await store.recent("b")] == ["other"]
    await store.clear("a")
    assert await store.recent("a") == []
    assert await store.recent("never-seen") == []


@pytest.mark.parametrize("session_id", ["", "has space", "x" * 200, "semi;colon", "new\nline"])
async def test_bad_session_ids_are_refused(db: SupportDatabase, session_id: str) -> None:
    with pytest.raises(InvalidSessionIdError, match="session_id"):
        await MessageStore(db).recent(session_id)


async def test_bad_role_is_refused(db: SupportDatabase) -> None:
    with pytest.raises(ConfigurationError, match="role"):
        await MessageStore(db).append("s", "system", "x")  # type: ignore[arg-type]  # the check under test


async def _started_at(database: SupportDatabase) -> object:
    async with database.connection() as conn:
        return await (await conn.execute("SELECT pg_postmaster_start_time() AS t")).fetchone()


async def test_a_restart_keeps_the_session(tmp_path: Path) -> None:
    """Stop the PostgreSQL server, start it again on the same data directory: the session is still there."""
    schema = f"r_{uuid.uuid4().hex[:8]}"
    server = EmbeddedPostgres(tmp_path / "pgdata")
    url = server.start()
    try:
        async with SupportDatabase(url, schema=schema) as database:
            await database.ensure_schema()
            await MessageStore(database).extend("persist", [("user", "my ticket is 3"), ("assistant", "noted")])
            first_start = await _started_at(database)
    finally:
        server.stop()
    url = server.start()
    try:
        async with SupportDatabase(url, schema=schema) as database:
            recent = await MessageStore(database).recent("persist")
            assert await _started_at(database) != first_start
    finally:
        server.stop()
    assert [(m.role, m.content) for m in recent] == [("user", "my ticket is 3"), ("assistant", "noted")]
