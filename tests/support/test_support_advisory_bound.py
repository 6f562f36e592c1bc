"""The bound on the advisory locks one process holds (``AdvisoryLocks(max_held=...)``,
``ROUTEGATE_DB_MAX_ADVISORY_LOCKS``), on the real PostgreSQL: counted in ``pg_locks`` from a connection of the
test's own, the locks held never pass the bound; the names beyond it wait for a place and get one when a holder
leaves, or end with :class:`LockCapacityError` (a :class:`LockTimeoutError`) when their time runs out; a desk
turn that finds no place in its budget ends with ``session_busy``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import psycopg
import pytest

from routegate.apps.support.advisory import AdvisoryLocks, LockCapacityError, LockTimeoutError, lock_key
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.errors import TurnFailedError
from routegate.apps.support.memory import session_lock_name
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core import Budget
from routegate.embed import MiniLMEncoder
from routegate.errors import ConfigurationError

pytestmark = pytest.mark.integration


async def _held(url: str, names: list[str]) -> int:
    """How many of ``names`` are held as advisory locks right now, by anyone (pg_locks splits a bigint key)."""
    pairs = [((lock_key(n) & 0xFFFF_FFFF_FFFF_FFFF) >> 32, lock_key(n) & 0xFFFF_FFFF) for n in names]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
            " AND (classid::bigint, objid::bigint) IN (SELECT * FROM unnest(%s::int8[], %s::int8[]))",
            ([p[0] for p in pairs], [p[1] for p in pairs]),
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_no_more_locks_held_than_the_bound_and_the_others_wait_their_turn(pg_url: str) -> None:
    locks = AdvisoryLocks(pg_url, max_held=3)
    names = [f"bound:{uuid.uuid4().hex}:{n}" for n in range(8)]
    go = asyncio.Event()
    inside: list[str] = []
    seen: list[int] = []

    async def holder(name: str) -> None:
        async with locks.hold(name, within=60):
            inside.append(name)
            seen.append(await _held(pg_url, names))
            await go.wait()

    try:
        tasks = [asyncio.create_task(holder(n)) for n in names]
        while len(inside) < 3:  # the first three are in; bounded: each pass is a database round trip
            await asyncio.wait(tasks, timeout=0.05, return_when=asyncio.FIRST_COMPLETED)
            assert not any(t.done() for t in tasks)
        for _ in range(10):  # the five others keep waiting: nothing more is taken meanwhile
            assert await _held(pg_url, names) == 3
            assert len(inside) == 3
        assert issubclass(LockCapacityError, LockTimeoutError)  # the desk answers both with session_busy
        with pytest.raises(LockCapacityError, match=r"max_held=3 advisory locks"):
            async with locks.hold(f"bound:{uuid.uuid4().hex}:late", within=0.1):
                pytest.fail("entered beyond the bound")
        go.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert sorted(inside) == sorted(names)
        assert max(seen) <= 3
        await locks.close()
        assert await _held(pg_url, names) == 0
    finally:
        await locks.close()


async def test_a_second_holder_of_a_name_shares_its_place_and_a_cancelled_waiter_leaves_none(pg_url: str) -> None:
    locks = AdvisoryLocks(pg_url, max_held=2)
    a, b, c = (f"share:{uuid.uuid4().hex}:{n}" for n in "abc")
    release = asyncio.Event()

    async def hold(name: str) -> None:
        async with locks.hold(name, within=60):
            await release.wait()

    try:
        first = asyncio.create_task(hold(a))
        again = asyncio.create_task(hold(a))  # queues on a's own lock, not for a place
        other = asyncio.create_task(hold(b))
        for _ in range(1000):  # bounded: each pass is a database round trip
            if await _held(pg_url, [a, b]) == 2:
                break
        waiter = asyncio.create_task(hold(c))  # no place: waits
        for _ in range(100):  # a few turns of the loop: its name is known to the locks, it waits for a place
            if len(locks) == 3 and not waiter.done():
                break
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await _held(pg_url, [a, b, c]) == 2
        release.set()
        await asyncio.wait_for(asyncio.gather(first, again, other), 60)
        async with locks.hold(c, within=5):  # every place was given back
            assert await _held(pg_url, [c]) == 1
    finally:
        await locks.close()


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_held"):
        AdvisoryLocks("postgresql://unused", max_held=0)


async def test_a_desk_turn_without_a_place_in_its_budget_is_session_busy(
    pg_url: str, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    async with _bounded_desk(pg_url, encoder, semantic, max_advisory_locks=1) as (desk, db):
        occupied = asyncio.Event()
        release = asyncio.Event()

        async def occupy() -> None:
            async with db.locks.hold(session_lock_name(db.schema, "someone-else"), within=5):
                occupied.set()
                await release.wait()

        holder = asyncio.create_task(occupy())
        await asyncio.wait_for(occupied.wait(), 30)
        try:
            with pytest.raises(TurnFailedError) as failed:
                await desk.ask("What is the status of ticket 1?", session_id="waits")
            assert failed.value.code == "session_busy"
            assert await desk.history("waits") == []  # nothing stored
        finally:
            release.set()
            await holder
        result = await desk.ask("What is the status of ticket 1?", session_id="waits")
        assert "Login not working" in result.answer


def _bounded_desk(
    url: str, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, *, max_advisory_locks: int
) -> AbstractAsyncContextManager[tuple[SupportAgent, SupportDatabase]]:
    @asynccontextmanager
    async def opened() -> AsyncIterator[tuple[SupportAgent, SupportDatabase]]:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        db = SupportDatabase(url, schema=schema, max_advisory_locks=max_advisory_locks)
        await db.open()
        try:
            budget = Budget(max_route_attempts=1, max_delegations=1, max_seconds=2.0)
            desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, budget=budget)
            await desk.start()
            yield desk, db
        finally:
            async with db.connection() as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await db.close()

    return opened()
