"""One session's turns run one at a time across processes: the advisory locks on PostgreSQL
(:mod:`routegate.apps.support.advisory`), two desks over one database, a turn that cannot get its session in time
(503 ``session_busy``), and two real ``routegate serve`` processes over one PostgreSQL.

How serialisation is observed: a first turn names customer 2, then N follow-ups ("Which tickets does she have?")
run at once. Each follow-up resolves "she" from what the turn before it established and says so in its trace
(``{"node": "followup", "carried": "customer 2, from turn K"}``), and a session's turns are numbered in the order
they ran. When the turns run one after the other, the N follow-ups carry from turns 1..N, each exactly once;
turns that overlap read the same history and carry from the same turn. The stored history is the last five turns
(the memory window holds 10 messages) in the order they ran, each user message followed by its own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from psycopg import sql

from advisory_holders import CuttableLink, holder_pids, terminate_holder
from routegate.apps.support import advisory
from routegate.apps.support.advisory import AdvisoryLocks, LockRead, LockTimeoutError, Tenure, lock_key
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SUPPORT_BUDGET, SupportAgent
from routegate.apps.support.memory import session_lock_key
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.core import Budget
from routegate.embed import MiniLMEncoder
from routegate.server import create_app
from routegate.server.testing import ServerThread, serve_process
from routegate.settings import Settings
from session_chain import FIRST, FOLLOW_UP, carried_from, check_serialised

pytestmark = pytest.mark.integration


def _held(conn: psycopg.Connection[Any], key: int) -> int:
    """How many sessions hold the advisory lock ``key``."""
    return len(holder_pids(conn, key))


@pytest.fixture
def other_process(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own, standing for another process holding a lock."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


# -- the locks ----------------------------------------------------------------------------------------------------


async def test_a_lock_held_elsewhere_keeps_the_waiter_out_until_it_is_let_go(
    pg_url: str, other_process: psycopg.Connection[Any]
) -> None:
    name = f"test:{uuid.uuid4().hex}"
    await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_lock(%s)", (lock_key(name),))
    locks = AdvisoryLocks(pg_url)
    try:
        with pytest.raises(LockTimeoutError, match=r"not free within 0\.05 s"):
            async with locks.hold(name, within=0.05):
                pytest.fail("entered a lock another session holds")
        waiter = asyncio.create_task(_enter_and_leave(locks, name, pg_url))
        await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_unlock(%s)", (lock_key(name),))
        assert await asyncio.wait_for(waiter, 30) == 1  # inside: this process's lock, and only it
        assert len(locks) == 0
        await locks.close()  # waits for the release under way
        assert await asyncio.to_thread(_held, other_process, lock_key(name)) == 0  # let go on leaving
    finally:
        await locks.close()


async def _enter_and_leave(locks: AdvisoryLocks, name: str, url: str, *, within: float = 30.0) -> int:
    """Holds ``name``; returns how many sessions held its key meanwhile (1: only this one)."""
    async with locks.hold(name, within=within):
        return await asyncio.to_thread(_holders, url, lock_key(name))


@contextlib.asynccontextmanager
async def _locks_and_rival(
    url: str, *, rival_url: str | None = None
) -> AsyncIterator[tuple[AdvisoryLocks, AdvisoryLocks]]:
    """This process's locks and another process's (``rival``), closed at the end."""
    locks, rival = AdvisoryLocks(url), AdvisoryLocks(rival_url or url)
    try:
        yield locks, rival
    finally:
        await locks.close()
        await rival.close()


def _holders(url: str, key: int) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return _held(conn, key)


async def test_a_holder_whose_connection_dies_lets_go(pg_url: str) -> None:
    """A killed process's backend ends with its connection, and its advisory locks go with it."""
    name = f"test:{uuid.uuid4().hex}"
    holder = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
    await holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(name),))
    locks = AdvisoryLocks(pg_url)
    try:
        waiter = asyncio.create_task(_enter_and_leave(locks, name, pg_url))
        await holder.close()  # as a SIGKILL would: no unlock, the socket closes
        assert await asyncio.wait_for(waiter, 30) == 1
    finally:
        await locks.close()


async def test_a_cancelled_waiter_holds_nothing_afterwards(pg_url: str, other_process: psycopg.Connection[Any]) -> None:
    """Cancelled at any point around the moment the lock comes free (between tries, during one that the server
    grants, inside), a waiter leaves no lock behind: another process gets it, and nothing is held at the end."""
    name = f"test:{uuid.uuid4().hex}"
    key = lock_key(name)
    locks, rival = AdvisoryLocks(pg_url), AdvisoryLocks(pg_url)
    try:
        for steps in range(16):  # cancel 0, 1, 2 … turns of the event loop after the lock came free
            await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_lock(%s)", (key,))
            waiter = asyncio.create_task(_enter_and_leave(locks, name, pg_url))
            for _ in range(3):
                await asyncio.sleep(0)  # lets it start trying
            await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_unlock(%s)", (key,))
            for _ in range(steps):
                await asyncio.sleep(0)
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
            assert await _enter_and_leave(rival, name, pg_url) == 1, steps  # free for another process
        await rival.close()  # after its last release
        assert await asyncio.to_thread(_held, other_process, key) == 0  # the waiter's process holds nothing
    finally:
        await locks.close()
        await rival.close()


async def test_a_process_queues_its_own_turns_in_arrival_order(pg_url: str) -> None:
    name = f"test:{uuid.uuid4().hex}"
    locks = AdvisoryLocks(pg_url)
    order: list[int] = []
    inside = 0

    async def turn(n: int) -> None:
        nonlocal inside
        async with locks.hold(name, within=30):
            inside += 1
            assert inside == 1
            await asyncio.sleep(0)
            order.append(n)
            inside -= 1

    try:
        await asyncio.gather(*(turn(n) for n in range(8)))
        assert order == list(range(8))
        assert len(locks) == 0
    finally:
        await locks.close()


async def test_a_lock_taken_again_while_its_release_is_under_way_is_held_once(pg_url: str) -> None:
    """A session's next turn in the same process often starts while the release of the last one is still on its
    way: the lock counts both, and another process gets it once the last turn has left."""
    name = f"test:{uuid.uuid4().hex}"
    async with _locks_and_rival(pg_url) as (locks, rival):
        for _ in range(3):
            async with locks.hold(name, within=30):
                pass  # leaving queues the release; the next hold comes before it is sent
        assert await _enter_and_leave(locks, name, pg_url) == 1
        assert await _enter_and_leave(rival, name, pg_url) == 1  # let go for good when the last one left


async def test_a_lost_connection_is_replaced(pg_url: str, other_process: psycopg.Connection[Any]) -> None:
    """The locks' connection terminated under a holder: its lock is gone (another process may enter), leaving
    does not raise, and the next lock reconnects."""
    name = f"test:{uuid.uuid4().hex}"
    async with _locks_and_rival(pg_url) as (locks, rival):
        async with locks.hold(name, within=30):
            await asyncio.to_thread(terminate_holder, other_process, lock_key(name))
            assert await _enter_and_leave(rival, name, pg_url) == 1
        assert await _enter_and_leave(locks, name, pg_url) == 1


def _blocking_read(key: int) -> LockRead:
    """A take's read that waits until the advisory lock ``key`` is free (no read should wait: here it keeps a
    statement of the locks' connection under way for as long as the test holds ``key``)."""
    return LockRead(
        "(SELECT {arg} FROM (SELECT set_config('lock_timeout', '0', true) AS t) AS s,"
        " LATERAL (SELECT pg_advisory_xact_lock_shared({key}) WHERE s.t IS NOT NULL) AS w)",
        key=sql.Literal(key),
    )


def _waiting_for(conn: psycopg.Connection[Any], key: int) -> None:
    """Returns once a backend waits for the advisory lock ``key`` (bounded)."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    for _ in range(3000):
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid::bigint = %s AND objid::bigint = %s",
            (unsigned >> 32, unsigned & 0xFFFF_FFFF),
        ).fetchone()
        if row is not None and row[0]:
            return
        time.sleep(0.01)
    pytest.fail(f"no backend waited for the advisory lock {key} within 30 s")


async def _held_here(locks: AdvisoryLocks, rival: AdvisoryLocks, name: str, url: str) -> tuple[Tenure, list[int]]:
    """Holds ``name``; returns its tenure and the backends that held its key meanwhile, after checking that another
    process could not take it."""
    async with locks.hold(name, within=30) as tenure:
        holders = await asyncio.to_thread(_holder_pids, url, lock_key(name))
        with pytest.raises(LockTimeoutError):
            async with rival.hold(name, within=0.05):
                pytest.fail("another process entered a lock this one holds")
        return tenure, holders


def _holder_pids(url: str, key: int) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return holder_pids(conn, key)


async def test_a_follow_up_whose_release_waits_on_a_lost_connection_takes_the_lock_again(
    pg_url: str, other_process: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The locks' connection terminated under a holder; the next holder of the name comes while the release still
    waits for a take to go with. PostgreSQL let go of the lock with the backend: the follow-up takes it again, on a
    new connection, in a new tenure, and holds it against every other process."""
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)  # the release waits until the next take
    name = f"test:{uuid.uuid4().hex}"
    async with _locks_and_rival(pg_url) as (locks, rival):
        async with locks.hold(name, within=30) as first:
            lost = await asyncio.to_thread(terminate_holder, other_process, lock_key(name))
        again, holders = await _held_here(locks, rival, name, pg_url)
        assert again is not first
        assert len(holders) == 1 and lost not in holders


async def test_the_next_holder_in_the_process_after_a_lost_connection_takes_the_lock_again(
    pg_url: str, other_process: psycopg.Connection[Any]
) -> None:
    """A turn queued in the process behind the holder whose connection was lost does not inherit the lock (it is
    gone): it takes it again, in a new tenure."""
    name = f"test:{uuid.uuid4().hex}"
    async with _locks_and_rival(pg_url) as (locks, rival):
        async with locks.hold(name, within=30) as first:
            queued = asyncio.create_task(_held_here(locks, rival, name, pg_url))
            lost = await asyncio.to_thread(terminate_holder, other_process, lock_key(name))  # queued meanwhile
        after, holders = await asyncio.wait_for(queued, 30)
        assert after is not first
        assert len(holders) == 1 and lost not in holders


async def test_a_follow_up_after_the_link_to_the_database_was_cut_takes_the_lock_again(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link between the locks and PostgreSQL cut with no word from the server (a network cut): the backend
    ends (its client is gone) and its lock with it; the follow-up whose release waited takes the lock again."""
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)
    name = f"test:{uuid.uuid4().hex}"
    key = lock_key(name)
    async with CuttableLink(pg_url).open() as link, _locks_and_rival(link.url, rival_url=pg_url) as (locks, rival):
        async with locks.hold(name, within=30) as first:
            (cut,) = await asyncio.to_thread(_holder_pids, pg_url, key)
            link.cut()
            await asyncio.to_thread(_let_go, pg_url, key)  # the backend saw its client gone and ended
        again, holders = await _held_here(locks, rival, name, pg_url)
        assert again is not first
        assert len(holders) == 1 and cut not in holders


def _let_go(url: str, key: int) -> None:
    """Returns once no backend holds the advisory lock ``key`` (bounded)."""
    for _ in range(3000):
        if not _holder_pids(url, key):
            return
        time.sleep(0.01)
    pytest.fail(f"the advisory lock {key} was still held after 30 s")


@pytest.mark.parametrize("lost", [False, True], ids=["alive", "lost-meanwhile"])
async def test_a_follow_up_during_another_statement_learns_from_its_end_whether_the_lock_is_held(
    pg_url: str, other_process: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch, lost: bool
) -> None:
    """A follow-up comes while a statement of the locks' connection is under way (the release waits for the next
    one). It keeps the lock if the connection was alive when the statement ended (the same tenure), and takes it
    again if the connection was lost meanwhile (the backend terminated during the statement)."""
    monkeypatch.setattr(advisory, "RELEASE_LINGER_SECONDS", 3600.0)
    name, blocker = f"test:{uuid.uuid4().hex}", lock_key(f"test:{uuid.uuid4().hex}")
    await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_lock(%s)", (blocker,))
    async with _locks_and_rival(pg_url) as (locks, rival):
        async with locks.hold(name, within=30) as first:
            under_way = asyncio.create_task(_enter_and_leave_reading(locks, f"{name}:other", _blocking_read(blocker)))
            await asyncio.to_thread(_waiting_for, other_process, blocker)  # its statement waits for the blocker
        follow_up = asyncio.create_task(_held_here(locks, rival, name, pg_url))
        if lost:
            gone = await asyncio.to_thread(terminate_holder, other_process, lock_key(name))
        await asyncio.to_thread(other_process.execute, "SELECT pg_advisory_unlock(%s)", (blocker,))
        again, holders = await asyncio.wait_for(follow_up, 30)
        await asyncio.wait_for(under_way, 30)
        assert len(holders) == 1
        if lost:
            assert again is not first and gone not in holders
        else:
            assert again is first  # kept: PostgreSQL never saw it free


async def _enter_and_leave_reading(locks: AdvisoryLocks, name: str, read: LockRead) -> None:
    async with locks.hold(name, within=30, read=read, read_arg="x") as tenure:
        assert tenure.read_by(read) == "x"


# -- desks over one database ---------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _desks(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer, count: int, budget: Budget = SUPPORT_BUDGET
) -> AsyncIterator[tuple[str, list[SupportAgent]]]:
    """``count`` desks, each with its own pool and locks (as separate processes have), over one schema."""
    schema = f"sess_{uuid.uuid4().hex[:12]}"
    async with contextlib.AsyncExitStack() as stack:
        desks = []
        for _ in range(count):
            db = await stack.enter_async_context(SupportDatabase(pg_url, schema=schema, max_size=4))
            desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, budget=budget)
            await desk.start()
            desks.append(desk)
        try:
            yield schema, desks
        finally:
            async with desks[0].db.connection() as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


async def test_two_desks_over_one_database_run_a_session_one_turn_at_a_time(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer
) -> None:
    async with _desks(pg_url, encoder, semantic, 2) as (_, desks):
        await desks[0].ask(FIRST, session_id="chain")
        results = await asyncio.gather(*(desks[n % 2].ask(FOLLOW_UP.format(n), session_id="chain") for n in range(12)))
        seen = {n: carried_from(r.notes) for n, r in enumerate(results)}
        stored = [m.to_dict() for m in await desks[1].history("chain")]
        check_serialised(seen, stored, {n: r.answer for n, r in enumerate(results)})


@contextlib.asynccontextmanager
async def _app(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer, budget: Budget
) -> AsyncIterator[FastAPI]:
    async with _desks(pg_url, encoder, semantic, 1, budget) as (schema, desks):
        app = create_app(desk=desks[0], settings=Settings())
        app.state.schema = schema
        yield app


def test_a_turn_that_cannot_get_its_session_in_time_is_a_503_and_stores_nothing(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer, other_process: psycopg.Connection[Any]
) -> None:
    budget = Budget(max_route_attempts=1, max_delegations=1, max_seconds=1.0)
    with ServerThread(app_factory=lambda: _app(pg_url, encoder, semantic, budget)) as server:
        assert server.app is not None
        key = session_lock_key(server.app.state.schema, "busy")
        other_process.execute("SELECT pg_advisory_lock(%s)", (key,))  # another process's turn of "busy" runs
        with httpx.Client(base_url=server.url, timeout=30) as c:
            body = {"message": "What is the status of ticket 1?", "session_id": "busy"}
            for headers in ({"Accept": "application/json"}, {}):  # JSON, then SSE: no event came before it
                r = c.post("/chat", json=body, headers=headers)
                assert r.status_code == 503, r.text
                assert r.headers["Retry-After"] == "5"
                assert r.json()["error"]["code"] == "session_busy"
            assert c.get("/sessions/busy").json()["messages"] == []
            other_process.execute("SELECT pg_advisory_unlock(%s)", (key,))
            r = c.post("/chat", json=body, headers={"Accept": "application/json"})
            assert r.status_code == 200, r.text
            assert len(c.get("/sessions/busy").json()["messages"]) == 2


# -- two `routegate serve` processes ----------------------------------------------------------------------------


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="routegate-sessions-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _serve(pg_url: str, data_dir: Path) -> Iterator[str]:
    env = dict(os.environ, DATABASE_URL=pg_url, ROUTEGATE_DATA_DIR=str(data_dir))
    env.pop("OPENAI_API_KEY", None)
    with serve_process(env=env) as (url, proc):
        yield url
    assert proc.returncode == 130  # Ctrl-C stopped it cleanly


@pytest.mark.e2e
def test_two_serve_processes_over_one_database_run_a_session_one_turn_at_a_time(pg_url: str, data_dir: Path) -> None:
    session = f"two-{uuid.uuid4().hex[:8]}"
    with _serve(pg_url, data_dir) as first, _serve(pg_url, data_dir) as second:

        async def run() -> tuple[dict[int, int | None], list[dict[str, Any]], dict[int, str]]:
            json_mode = {"Accept": "application/json"}
            async with httpx.AsyncClient(timeout=60) as c:
                opening = await c.post(
                    f"{first}/chat", json={"message": FIRST, "session_id": session}, headers=json_mode
                )
                assert opening.status_code == 200, opening.text

                async def follow_up(n: int) -> dict[str, Any]:
                    server = (first, second)[n % 2]
                    body = {"message": FOLLOW_UP.format(n), "session_id": session}
                    r = await c.post(f"{server}/chat", json=body, headers=json_mode)
                    assert r.status_code == 200, r.text
                    answer: dict[str, Any] = r.json()
                    return answer

                answers = await asyncio.gather(*(follow_up(n) for n in range(12)))
                stored = (await c.get(f"{second}/sessions/{session}")).json()["messages"]
            seen = {n: carried_from(a["trace"]) for n, a in enumerate(answers)}
            return seen, stored, {n: a["answer"] for n, a in enumerate(answers)}

        seen, stored, answers = asyncio.run(run())
    check_serialised(seen, stored, answers)
