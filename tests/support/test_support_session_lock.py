"""One lock per session: the desk's own (a PostgreSQL advisory lock, across processes) serialises its turns and
its reset; a server adds none around it (``SerialisesSessions``)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from routegate.apps.support.advisory import AdvisoryLocks
from routegate.apps.support.contracts import SerialisesSessions
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.memory import session_lock_name
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from routegate.server._turns import SessionLocks

pytestmark = pytest.mark.integration


@pytest.fixture
async def desk(db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> SupportAgent:
    agent = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await agent.start()
    return agent


async def test_a_reset_waits_for_the_session_held_by_another_process(desk: SupportAgent, pg_url: str) -> None:
    session = f"reset-{uuid.uuid4().hex[:8]}"
    await desk.ask("What is the status of ticket 2?", session_id=session)
    other = AdvisoryLocks(pg_url)  # another process's turn of the session
    try:
        async with other.hold(session_lock_name(desk.db.schema, session), within=5):
            reset = asyncio.create_task(desk.reset(session))
            for _ in range(1000):  # bounded: the reset reaches the session's lock (or, unlocked, ends)
                if desk.sessions_held() == 1 or reset.done():
                    break
                await asyncio.sleep(0.005)
            assert not reset.done()  # it waits for the running turn
            assert len(await desk.history(session)) == 2
        await asyncio.wait_for(reset, 30)
    finally:
        await other.close()
    assert await desk.history(session) == []
    assert desk.sessions_held() == 0


async def test_the_desk_is_the_servers_session_lock(desk: SupportAgent) -> None:
    assert isinstance(desk, SerialisesSessions) and desk.serialises_sessions()
    locks = SessionLocks(desk)
    session = f"server-{uuid.uuid4().hex[:8]}"
    async with locks.hold(session):  # the server's hold leaves the session to the desk: a turn runs inside it
        result = await desk.ask("What is the status of ticket 2?", session_id=session)
        assert len(locks) == 0  # the server keeps no lock of its own
    assert result.stop_reason == "success"
    async with desk.memory.hold(session, within=5):  # the desk's lock, as a running turn holds it
        assert len(locks) == 1  # the server counts the desk's sessions
        waiting = asyncio.create_task(desk.ask("Can you help me?", session_id=session))
        done, _ = await asyncio.wait([waiting], timeout=0.2)
        assert not done  # the next turn waits for the desk's lock
    assert (await asyncio.wait_for(waiting, 30)).stop_reason == "success"
    assert len(locks) == 0
