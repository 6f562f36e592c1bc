"""The history a session's holder keeps while it holds the session's lock without a break: follow-ups that come
while the lock is still held read nothing from the database, and a turn that another process ran in between is
always seen (the kept history goes with the lock's tenure).

"Another process" here is a second :class:`SupportDatabase` on the same schema: its own pool and its own session
locks' connection, so its advisory locks are another PostgreSQL backend's, as another process's would be.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from advisory_holders import terminate_holder_at
from routegate.apps.support import advisory
from routegate.apps.support.contracts import Message
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.memory import MessageStore, session_lock_key
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from support.test_support_round_trips import one_connection, traced

pytestmark = pytest.mark.integration


@pytest.fixture
async def other(db: SupportDatabase) -> AsyncIterator[SupportDatabase]:
    """Another desk process's view of ``db``'s schema: its own pool and its own session locks' connection."""
    async with SupportDatabase(db.url, schema=db.schema) as database:
        yield database


def _said(history: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in history]


async def test_turns_alternating_between_two_processes_each_read_the_others(
    db: SupportDatabase, other: SupportDatabase
) -> None:
    mine, theirs, fresh = MessageStore(db, limit=4), MessageStore(other, limit=4), MessageStore(db, limit=4)
    session = f"alt-{uuid.uuid4().hex[:8]}"
    said: list[tuple[str, str]] = []
    for turn in range(6):
        store = mine if turn % 2 == 0 else theirs
        # the other process's lock may still wait for its release: the take waits for it (the lock is the order)
        async with store.hold(session, within=10.0) as held:
            history = await held.recent()
            assert _said(history) == said[-4:], f"turn {turn} did not see the turns before it"
            await held.extend([("user", f"question {turn}"), ("assistant", f"answer {turn}")])
            said += [("user", f"question {turn}"), ("assistant", f"answer {turn}")]
            # what the holder keeps is what the database holds (timestamps and all)
            assert await held.recent() == await fresh.recent(session)


async def test_a_follow_up_sees_the_turn_another_desk_ran_in_between(
    db: SupportDatabase, other: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    first, second = (SupportAgent(db=d, encoder=encoder, semantic=semantic) for d in (db, other))
    await first.start()
    await second.start()
    session = f"desks-{uuid.uuid4().hex[:8]}"
    assert "John Doe" in (await first.ask("What is the status of ticket 1?", session_id=session)).answer
    assert "Jane Smith" in (await second.ask("status of ticket 3", session_id=session)).answer
    # "she" is ticket 3's customer, from the turn the other desk ran: a history kept from the first turn would
    # not know her
    where = await first.ask("Where does she live?", session_id=session)
    assert "London" in where.answer and "New York" not in where.answer


async def test_a_follow_up_after_the_locks_connection_was_lost_sees_the_turn_another_desk_ran(
    db: SupportDatabase,
    other: SupportDatabase,
    encoder: MiniLMEncoder,
    semantic: ExampleEmbeddingLayer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first desk's session locks' connection is terminated after a turn whose release still waits for a take
    to go with: PostgreSQL let go of the session's lock with it, and another desk runs a turn. The first desk's
    follow-up sees that turn: it takes the lock again instead of going on with the lost tenure's history."""
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)  # every release waits for the next take
    first, second = (SupportAgent(db=d, encoder=encoder, semantic=semantic) for d in (db, other))
    await first.start()
    await second.start()
    session = f"lost-{uuid.uuid4().hex[:8]}"
    assert "John Doe" in (await first.ask("What is the status of ticket 1?", session_id=session)).answer
    await asyncio.to_thread(terminate_holder_at, db.url, session_lock_key(db.schema, session))
    assert "Jane Smith" in (await second.ask("status of ticket 3", session_id=session)).answer
    async with other.locks.hold(f"{session}-next", within=5.0):  # sends the second desk's release with it
        pass
    where = await first.ask("Where does she live?", session_id=session)
    assert "London" in where.answer and "New York" not in where.answer


async def test_a_follow_up_while_the_lock_is_held_reads_no_history(
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
    pg_url: str,
    encoder: MiniLMEncoder,
    semantic: ExampleEmbeddingLayer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the previous turn's release waits (for a take to share its statement) until the follow-up comes
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)
    async with one_connection(seeded_database, pg_url, encoder.dim) as (db, conn):
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        session = f"kept-{uuid.uuid4().hex[:8]}"
        for text in ("status of ticket 3", "Where does she live?"):  # the SQL tool has seen the queries
            await desk.ask(text, session_id=f"{session}-warm")
        await desk.ask("status of ticket 3", session_id=session)
        with traced(conn, tmp_path / "follow-up.trace") as turn:
            where = await desk.ask("Where does she live?", session_id=session)
        assert (where.route, where.stop_reason) == ("POSTGRES", "success")
        assert "London" in where.answer  # the kept history carries the stored context of the turn before
        seen = turn()
        assert "FROM support_messages WHERE session_id" not in seen.sent.split("INSERT INTO support_messages")[0]
        assert seen.round_trips == 2, seen.sent  # the SQL tool's pipeline and the memory write
        assert seen.statements == 5, seen.sent
        # and what it kept is what the database holds
        assert _said(await desk.history(session))[-2:] == [
            ("user", "Where does she live?"),
            ("assistant", where.answer),
        ]


async def test_turns_queued_in_the_process_each_see_the_one_before(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await desk.start()
    session = f"queued-{uuid.uuid4().hex[:8]}"
    asks = ["What is the status of ticket 1?", "status of ticket 3", "Where does she live?"]
    # all three wait for the session in the process: the lock passes from one to the next without a release
    results = await asyncio.gather(*(desk.ask(text, session_id=session) for text in asks))
    assert "London" in results[2].answer
    assert [m.content for m in await desk.history(session)] == [
        t for text, result in zip(asks, results, strict=True) for t in (text, result.answer)
    ]


async def test_a_write_outside_the_hold_is_seen_by_the_holder(db: SupportDatabase) -> None:
    store = MessageStore(db)
    session = f"misuse-{uuid.uuid4().hex[:8]}"
    async with store.hold(session, within=5.0) as held:
        assert await held.recent() == []
        # a writer that does not hold the session (not the desk's way): what the holder kept is dropped
        await store.extend(session, [("user", "hello")])
        assert _said(await held.recent()) == [("user", "hello")]
        await held.clear()
        assert await held.recent() == []


async def test_a_take_while_the_release_waits_keeps_the_lock_from_every_other_process(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)  # the release waits for a take to go with
    mine, theirs = advisory.AdvisoryLocks(pg_url), advisory.AdvisoryLocks(pg_url)
    name = f"keep-{uuid.uuid4().hex[:8]}"
    try:
        async with mine.hold(name, within=5) as first:
            pass
        async with mine.hold(name, within=5) as again:
            assert again is first  # one tenure: PostgreSQL never saw the lock free
            with pytest.raises(advisory.LockTimeoutError):
                async with theirs.hold(name, within=0.1):
                    pass
        # a take of another name sends the waiting release with it: the next take of the name starts a new tenure
        async with mine.hold(f"{name}-other", within=5):
            pass
        async with theirs.hold(name, within=5) as other_tenure:
            assert other_tenure is not first
        async with theirs.hold(f"{name}-theirs", within=5):  # and theirs goes the same way
            pass
        async with mine.hold(name, within=5) as later:
            assert later is not first
    finally:
        await mine.close()
        await theirs.close()
