"""One contract, two desks: every test here runs against the real desk (embedded PostgreSQL, the encoder) and
against the scripted in-memory :class:`FakeSupportDesk` that the server's and the UI's tests stand on. What the
fake teaches those tests holds for the real desk because both pass this file."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from routegate.apps.support import (
    DatabaseUnavailableError,
    FakeSupportDesk,
    InvalidSessionIdError,
    SupportAgent,
    TurnFailedError,
)
from routegate.apps.support.contracts import (
    AnswerToken,
    RouteChosen,
    SupportDesk,
    SupportEvent,
    ToolUsed,
    TurnError,
    TurnResult,
)
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core import FinalEvent, RunResult
from routegate.core.messages import InvalidMessageError
from routegate.embed import MiniLMEncoder
from support.turn_events import final_of


@dataclass
class Subject:
    """A desk under contract and the one way the test can break its database."""

    desk: SupportDesk
    take_database_down: Callable[[], Awaitable[None]]


async def _fake() -> AsyncIterator[Subject]:
    desk = FakeSupportDesk()

    async def down() -> None:
        desk.database_up = False

    yield Subject(desk, down)


async def _real(pg_url: str, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> AsyncIterator[Subject]:
    schema = f"c_{uuid.uuid4().hex[:12]}"
    db = SupportDatabase(pg_url, schema=schema, max_size=2)
    await db.open()
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await desk.start()
    closed = False

    async def down() -> None:
        nonlocal closed
        closed = True
        await db.close()  # every connection of the desk's pool is gone: the database is unreachable for it

    try:
        yield Subject(desk, down)
    finally:
        if not closed:
            await db.close()
        async with SupportDatabase(pg_url, schema=schema, max_size=1) as cleanup, cleanup.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.integration)])
async def subject(request: pytest.FixtureRequest) -> AsyncIterator[Subject]:
    if request.param == "fake":
        source = _fake()
    else:
        source = _real(
            request.getfixturevalue("pg_url"), request.getfixturevalue("encoder"), request.getfixturevalue("semantic")
        )
    async for value in source:
        yield value


async def _events(desk: SupportDesk, message: str, session_id: str) -> list[SupportEvent]:
    return [event async for event in desk.iter(message, session_id=session_id)]


def test_both_implement_the_protocol(subject: Subject) -> None:
    assert isinstance(subject.desk, SupportDesk)


async def test_astream_is_the_deprecated_name_of_iter_on_both(subject: Subject) -> None:
    with pytest.warns(DeprecationWarning, match=r"\.astream is deprecated: call \w+\.iter, the same method"):
        stream = subject.desk.astream("hello there", session_id="old-name")  # type: ignore[attr-defined]
    old = [event.type async for event in stream]
    assert old == [event.type for event in await _events(subject.desk, "hello there", "new-name")]
    assert old[0] == "route" and old[-1] == "final"


@pytest.mark.parametrize(
    ("message", "route"),
    [
        ("What is the status of ticket 1?", "POSTGRES"),
        ("How do I reset my password?", "VECTOR"),
        ("What's the weather today?", "EXTERNAL"),
        ("hello there", "LLM"),
    ],
)
async def test_a_turn_streams_route_tool_tokens_final(subject: Subject, message: str, route: str) -> None:
    events = await _events(subject.desk, message, "s1")
    kinds = [event.type for event in events]
    expected_head = ["route", "tool"] if route != "LLM" else ["route"]
    assert kinds[: len(expected_head)] == expected_head
    assert kinds[-1] == "final"
    assert set(kinds[len(expected_head) : -1]) == {"token"}
    chosen, final = events[0], final_of(events)
    assert isinstance(chosen, RouteChosen)
    assert chosen.route == final.route == route
    if route != "LLM":
        assert isinstance(events[1], ToolUsed)
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == final.answer
    assert final.session_id == "s1"
    assert final.outcome.ok and final.stop_reason == "success" and final.phase is None


async def test_a_turns_last_event_is_the_one_final_event_carrying_the_one_result_type(subject: Subject) -> None:
    events = await _events(subject.desk, "What is the status of ticket 1?", "final-event")
    last = events[-1]
    assert type(last) is FinalEvent and last.type == "final"
    assert isinstance(last.result, RunResult) and isinstance(last.result, TurnResult)
    assert sum(isinstance(event, FinalEvent) for event in events) == 1
    result = last.result
    assert result.raise_for_stop() is result and result.status == "ok" and result.output == result.answer
    assert result.elapsed_ms == result.latency_ms > 0 and len(result.run_id) == 16
    assert result.to_dict()["session_id"] == "final-event" and "run_id" not in result.to_dict()


async def test_ask_returns_the_turns_result_and_the_history_keeps_it(subject: Subject) -> None:
    desk = subject.desk
    result = await desk.ask("What's the weather today?", session_id="s2")
    assert isinstance(result, TurnResult) and result.route == "EXTERNAL"
    history = await desk.history("s2")
    assert [(m.role, m.content) for m in history] == [
        ("user", "What's the weather today?"),
        ("assistant", result.answer),
    ]
    assert await desk.history("another-session") == []


async def test_a_turn_reads_like_a_run_result_and_its_json_stays_the_wire_form(subject: Subject) -> None:
    first = await subject.desk.ask("What is the status of ticket 1?", session_id="reads")
    second = await subject.desk.ask("What is the status of ticket 1?", session_id="reads")
    assert first.ok is first.outcome.ok is True and first.output == first.answer
    assert first.elapsed_ms == first.latency_ms > 0
    assert len(first.run_id) == 16 and first.run_id != second.run_id
    assert list(first.to_dict()) == ["session_id", "route", "answer", "stop_reason", "fallback", "trace", "latency_ms"]


async def test_the_history_keeps_the_last_ten_messages_oldest_first(subject: Subject) -> None:
    desk = subject.desk
    for n in range(6):
        await desk.ask(f"hello number {n}", session_id="s3")
    history = await desk.history("s3")
    assert len(history) == 10
    assert [m.role for m in history] == ["user", "assistant"] * 5
    assert [m.content for m in history if m.role == "user"] == [f"hello number {n}" for n in range(1, 6)]


async def test_reset_forgets_one_session_only(subject: Subject) -> None:
    desk = subject.desk
    await desk.ask("hello", session_id="keep")
    await desk.ask("hello", session_id="drop")
    await desk.reset("drop")
    assert await desk.history("drop") == []
    assert len(await desk.history("keep")) == 2
    await desk.reset("never-seen")  # nothing to forget is not an error


@pytest.mark.parametrize(("message", "code"), [("", "empty_message"), ("   \n ", "empty_message")])
async def test_a_refused_message_is_one_error_event_and_nothing_is_kept(
    subject: Subject, message: str, code: str
) -> None:
    events = await _events(subject.desk, message, "s4")
    assert len(events) == 1 and isinstance(events[0], TurnError) and events[0].code == code
    with pytest.raises(InvalidMessageError):
        await subject.desk.ask(message, session_id="s4")
    assert await subject.desk.history("s4") == []


@pytest.mark.parametrize("session_id", ["", "has space", "x" * 161, "semi;colon"])
async def test_a_refused_session_id_is_one_error_event_and_a_clear_error(subject: Subject, session_id: str) -> None:
    events = await _events(subject.desk, "hello", session_id)
    assert len(events) == 1 and isinstance(events[0], TurnError) and events[0].code == "bad_session_id"
    with pytest.raises(InvalidSessionIdError, match="session_id must be"):
        await subject.desk.ask("hello", session_id=session_id)
    with pytest.raises(InvalidSessionIdError, match="session_id must be"):
        await subject.desk.history(session_id)
    with pytest.raises(InvalidSessionIdError, match="session_id must be"):
        await subject.desk.reset(session_id)


async def test_with_the_database_down_every_call_says_so(subject: Subject) -> None:
    desk = subject.desk
    assert await desk.healthy()
    await subject.take_database_down()
    assert not await desk.healthy()
    events = await _events(desk, "What is the status of ticket 1?", "s5")
    assert len(events) == 1 and isinstance(events[0], TurnError) and events[0].code == "database_unavailable"
    with pytest.raises(TurnFailedError) as failed:
        await desk.ask("hello", session_id="s5")
    assert failed.value.code == "database_unavailable"
    with pytest.raises(DatabaseUnavailableError):
        await desk.history("s5")
    with pytest.raises(DatabaseUnavailableError):
        await desk.reset("s5")
