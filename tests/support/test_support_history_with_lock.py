"""A session's history read in the statement that takes its lock: a turn whose session's lock was let go (the shape
of people typing) pays no exchange of its own for its history; a take that is not granted reads nothing; the read
sees what the lock's previous holder committed, in the desk's own schema.

"Another process" here is a second :class:`SupportDatabase` on the same schema: its own pool and its own session
locks' connection, so its advisory locks are another PostgreSQL backend's, as another process's would be. The
locks' connections are traced as ``bench/desk_cost.py`` traces them: libpq's own protocol trace.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from routegate.apps.support import advisory
from routegate.apps.support.advisory import AdvisoryLocks, LockRead
from routegate.apps.support.contracts import Message
from routegate.apps.support.db import HISTORY_FUNCTION, HISTORY_QUERY, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.memory import MessageStore, session_lock_key
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from support.test_support_round_trips import one_connection, traced

pytestmark = pytest.mark.integration


@pytest.fixture
def locks_connections(monkeypatch: pytest.MonkeyPatch) -> list[psycopg.AsyncConnection[Any]]:
    """Every session locks' connection opened from here on (they are opened on a lock's first take)."""
    opened: list[psycopg.AsyncConnection[Any]] = []
    original = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def connect(cls: type[psycopg.AsyncConnection[Any]], *args: Any, **kwargs: Any) -> Any:
        conn = await original(cls, *args, **kwargs)
        if kwargs.get("application_name") == advisory.APPLICATION_NAME:
            opened.append(conn)
        return conn

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(connect))
    return opened


def _said(history: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in history]


async def test_a_turn_reads_its_history_in_the_statement_that_takes_its_lock(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
    semantic: ExampleEmbeddingLayer,
    locks_connections: list[psycopg.AsyncConnection[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a release waits for the next take to share its statement: the counts below are exact
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)
    async with one_connection(seeded_database, pg_url, encoder.dim) as (db, pool):
        session = f"take-{uuid.uuid4().hex[:8]}"
        # another process runs the session's first turn, and lets its lock go (closing sends the release)
        async with SupportDatabase(db.url, schema=db.schema) as first:
            earlier = SupportAgent(db=first, encoder=encoder, semantic=semantic)
            await earlier.start()
            await earlier.ask("status of ticket 3", session_id=session)
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        for text in ("status of ticket 3", "Where does she live?"):  # the SQL tool has seen the queries
            await desk.ask(text, session_id=f"{session}-warm")
        [locks] = [conn for conn in locks_connections if not conn.closed]  # this desk's, open since the warm-up
        with traced(pool, tmp_path / "pool.trace") as on_pool, traced(locks, tmp_path / "locks.trace") as on_locks:
            where = await desk.ask("Where does she live?", session_id=session)
        # "she" is ticket 3's customer, from the turn the other process ran: its history came with the take
        assert (where.route, where.stop_reason) == ("POSTGRES", "success")
        assert "London" in where.answer and "New York" not in where.answer
        pooled, lock = on_pool(), on_locks()
        # the pool: the SQL tool's pipeline and the memory write, no history read
        assert "support_messages WHERE session_id" not in pooled.sent.split("INSERT INTO support_messages")[0]
        assert (pooled.round_trips, pooled.statements) == (2, 5), pooled.sent
        # the locks' connection: one statement (the take, the warm-up's release, the history read), one round trip
        assert (lock.round_trips, lock.statements) == (1, 1), lock.sent
        assert "pg_try_advisory_lock" in lock.sent and HISTORY_FUNCTION in lock.sent, lock.sent
        history = _said(await desk.history(session))
        assert len(history) == 4 and history[0] == ("user", "status of ticket 3")
        assert history[2:] == [("user", "Where does she live?"), ("assistant", where.answer)]


async def test_turns_alternating_between_two_processes_read_each_others_with_their_takes(
    db: SupportDatabase, locks_connections: list[psycopg.AsyncConnection[Any]], tmp_path: Path
) -> None:
    async with (
        SupportDatabase(db.url, schema=db.schema, min_size=1, max_size=1) as one,
        SupportDatabase(db.url, schema=db.schema, min_size=1, max_size=1) as other,
    ):
        pools = []
        for database in (one, other):  # each process's one pooled connection
            async with database.connection() as conn:
                pools.append(conn)
        mine, theirs, fresh = MessageStore(one, limit=4), MessageStore(other, limit=4), MessageStore(db, limit=4)
        session = f"alt-{uuid.uuid4().hex[:8]}"
        said: list[tuple[str, str]] = []
        for turn in range(7):
            store, pool = (mine, pools[0]) if turn % 2 == 0 else (theirs, pools[1])
            with traced(pool, tmp_path / f"turn-{turn}.trace") as on_pool:
                async with store.hold(session, within=10.0) as held:
                    history = await held.recent()
            pooled = on_pool()
            assert _said(history) == said[-4:], f"turn {turn} did not see the turns before it"
            assert pooled.statements == 0, pooled.sent  # the history came with the lock's take
            async with store.hold(session, within=10.0) as held:
                await held.extend([("user", f"question {turn}"), ("assistant", f"answer {turn}")])
                # what came with the take, and what the holder kept since, is what the database holds
                assert await held.recent() == await fresh.recent(session)
            said += [("user", f"question {turn}"), ("assistant", f"answer {turn}")]
        assert len(locks_connections) == 2  # one locks' connection per process


async def test_a_take_that_is_not_granted_reads_nothing(
    db: SupportDatabase, pg_url: str, locks_connections: list[psycopg.AsyncConnection[Any]], tmp_path: Path
) -> None:
    # a read that leaves a mark: a sequence moves when its nextval runs, whatever the transaction does
    probe = sql.Identifier(db.schema, "probe")
    async with db.connection() as conn:
        await conn.execute(sql.SQL("CREATE SEQUENCE {}").format(probe))
    read = LockRead("jsonb_build_array(nextval({probe}), {arg})", probe=sql.Literal(f"{db.schema}.probe"))
    mine, theirs = AdvisoryLocks(pg_url), AdvisoryLocks(pg_url)
    name = f"probe-{uuid.uuid4().hex[:8]}"
    try:
        async with mine.hold(f"{name}-open", within=5):  # the connection opened before the trace
            pass
        [conn] = locks_connections
        async with theirs.hold(name, within=5):
            with traced(conn, tmp_path / "tries.trace") as tries, pytest.raises(advisory.LockTimeoutError):
                async with mine.hold(name, within=0.1, read=read, read_arg="mine"):
                    pass
            assert tries().sent.count("nextval") >= 2, tries().sent  # tried, and tried again
            async with db.connection() as conn2:
                called = await (await conn2.execute(sql.SQL("SELECT is_called FROM {}").format(probe))).fetchone()
            assert called == {"is_called": False}  # not granted: nothing read
        async with mine.hold(name, within=5, read=read, read_arg="mine") as tenure:
            assert tenure.read_by(LockRead("length({arg})")) is None  # another read's
            assert tenure.read_by(read) == [1, "mine"]
            assert tenure.read_by(read) is None  # once
        async with mine.hold(name, within=5, read=read, read_arg="mine") as kept:
            assert kept is tenure and kept.read_by(read) is None  # kept from the release: no take, no read
    finally:
        await mine.close()
        await theirs.close()


async def test_many_takes_with_reads_share_a_statement_and_each_gets_its_own_rows(
    db: SupportDatabase, pg_url: str, locks_connections: list[psycopg.AsyncConnection[Any]], tmp_path: Path
) -> None:
    stores = MessageStore(db, limit=3)
    sessions = [f"many-{uuid.uuid4().hex[:8]}-{i}" for i in range(8)]
    for i, session in enumerate(sessions):
        async with stores.hold(session, within=5) as held:
            await held.extend([("user", f"q{i}.{n}") for n in range(i % 5)])
    other = MessageStore(db, limit=3)
    [conn] = locks_connections

    async def turn(session: str) -> list[Message]:
        async with other.hold(session, within=5) as held:
            return await held.recent()

    with traced(conn, tmp_path / "many.trace") as many:
        histories = await asyncio.gather(*(turn(session) for session in sessions))
    for i, history in enumerate(histories):
        assert [m.content for m in history] == [f"q{i}.{n}" for n in range(i % 5)][-3:]
    assert many().statements < len(sessions), many().sent  # the takes went together


async def test_the_history_read_with_the_take_is_the_desks_own_schemas(
    db: SupportDatabase,
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
) -> None:
    # the locks' connection has no search path of the desk's: two desks, two schemas, one session id
    session = f"schema-{uuid.uuid4().hex[:8]}"
    async with seeded_database(pg_url, encoder.dim) as elsewhere:
        for database, said in ((db, "in one"), (elsewhere, "in the other")):
            store = MessageStore(database)
            async with store.hold(session, within=5) as held:
                await held.extend([("user", said)])
        for database, said in ((db, "in one"), (elsewhere, "in the other")):
            async with SupportDatabase(database.url, schema=database.schema) as again:
                store = MessageStore(again)
                async with store.hold(session, within=5) as held:
                    assert _said(await held.recent()) == [("user", said)]


async def test_the_read_sees_what_the_previous_holder_committed_before_letting_go(
    db: SupportDatabase, pg_url: str
) -> None:
    """The statement's snapshot is older than its take: only a VOLATILE function's query (a snapshot of its own,
    taken when it runs) sees what the holder committed between the two. Here the statement waits for the lock
    (``pg_advisory_lock``) where the desk's would try it, so that the holder's commit falls in between."""
    function = sql.Identifier(db.schema, HISTORY_FUNCTION)
    inline = HISTORY_QUERY.format(table=f"{db.schema}.support_messages", session="%(session)s", limit="10")
    reads = {
        "the desk's read": sql.SQL("SELECT jsonb_array_length({}(%(session)s, 10)) AS seen").format(function),
        "a plain SELECT": sql.SQL("SELECT count(*) AS seen FROM (" + inline + ") AS q"),
    }
    seen = {}
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as holder:
        for what, read in reads.items():
            session = f"snapshot-{uuid.uuid4().hex[:8]}"
            key = session_lock_key(db.schema, session)
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as taker:
                await holder.execute("SELECT pg_advisory_lock(%s)", (key,))
                statement = sql.SQL(
                    "WITH o AS MATERIALIZED (SELECT pg_advisory_lock(%(key)s)) SELECT r.seen FROM o, LATERAL ({}) AS r"
                ).format(read)
                taking = asyncio.create_task(taker.execute(statement, {"key": key, "session": session}))
                for _ in range(2000):  # bounded: until the taker's statement waits for the lock
                    cur = await holder.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = %s",
                        (taker.info.backend_pid,),
                    )
                    if (await cur.fetchone()) != (0,):
                        break
                    await asyncio.sleep(0.005)
                store = MessageStore(db)
                await store.extend(session, [("user", what)])  # the holder's write, committed
                await holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
                seen[what] = (await (await taking).fetchone() or (None,))[0]
    assert seen == {"the desk's read": 1, "a plain SELECT": 0}  # the plain one misses the holder's write


async def test_the_reader_role_may_not_call_the_history_function(db: SupportDatabase) -> None:
    if db.reader_role is None:
        pytest.skip("the server did not let the desk create its reader role")
    async with db.connection() as conn, conn.transaction(force_rollback=True):
        await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(db.reader_role)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(sql.SQL("SELECT {}(%s, 10)").format(sql.Identifier(db.schema, HISTORY_FUNCTION)), ("x",))


async def test_a_memory_table_locked_by_another_session_stops_no_take(db: SupportDatabase, pg_url: str) -> None:
    """The locks' connection takes every lock of the process: the history read in its statement does not wait for
    a table another session holds exclusively (it reads nothing); the turn's history is read on the pool, waiting
    there as it did before, and is right once the table is free."""
    store = MessageStore(db)
    session = f"locked-{uuid.uuid4().hex[:8]}"
    async with store.hold(session, within=5) as held:
        await held.extend([("user", "before the lock")])
    fresh = MessageStore(db)  # another store: no history kept for it
    async with await psycopg.AsyncConnection.connect(pg_url) as admin:
        await admin.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(db.schema, "support_messages"))
        )
        try:
            # a new tenure, taken while the table is locked (a waiting read would hold up every take behind it)
            async with fresh.hold(session, within=5) as holding:
                async with db.locks.hold(f"{session}-other", within=5):  # the locks' connection still answers
                    pass
                reading = asyncio.create_task(holding.recent())
                async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as look:
                    for _ in range(2000):  # bounded: until the pool's read waits for the table
                        cur = await look.execute(
                            "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass AND NOT granted",
                            (f"{db.schema}.support_messages",),
                        )
                        if (await cur.fetchone()) != (0,) or reading.done():
                            break
                        await asyncio.sleep(0.005)
                assert not reading.done()  # it waits there, on the pool
                await admin.rollback()
                assert _said(await reading) == [("user", "before the lock")]
        finally:
            await admin.rollback()


@pytest.mark.parametrize(
    ("expression", "parts", "says"),
    [
        ("length({arg}) % 2", {}, "may not contain '%'"),
        ("{table}.x + length({arg})", {}, "names {table}, which is not among its parts (none"),
        ("{tabel}", {"table": sql.Identifier("t")}, "names {tabel}, which is not among its parts (table;"),
    ],
)
def test_a_read_that_could_not_run_is_refused_when_it_is_made(
    expression: str, parts: dict[str, Any], says: str
) -> None:
    """A read whose statement could not run would fail every take carrying it (and drop the locks' connection with
    every lock held on it): it is refused when it is made, with what to change."""
    from routegate.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=re.escape(says)):
        LockRead(expression, **parts)  # type: ignore[arg-type]  # arbitrary text, as a caller may pass
