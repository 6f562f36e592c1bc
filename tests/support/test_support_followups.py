"""Follow-ups across turns, on the real desk (embedded PostgreSQL): the multi-turn set offline and through the
scripted OpenAI-compatible server, the issue's examples with what the route event and the trace say, the stored
turn context (schema upgrade, untrusted rows), and the resolver at its boundary (any message, any stored context)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.contracts import Message, RouteChosen
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.followup import resolve
from routegate.apps.support.memory import MessageStore
from routegate.apps.support.planner import SqlPlanner
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.apps.support.sqlguard import check_sql
from routegate.embed import MiniLMEncoder
from routegate.llm.openai_chat import OpenAIChatModel
from routegate.testing import ScriptedOpenAIServer
from support.followup_cases import Conversation, conversations, model_responder, problems
from support.turn_events import final_of

CONVERSATIONS = conversations()
KNOWN_LIMITS = {
    # from the second held-out batch (written after the resolver was settled, never tuned on), not resolved: an
    # ordinal id with no noun ("and number 3?"), "that email" (a thing the article names, not the article), and
    # "them" meaning a list of tickets (read as their customer); see docs/support.md. (A fourth, "any tickets for
    # him?", read "him" as a name; fixed after, so that batch is no longer wholly blind.)
    "b-city-number-3#2",
    "b-password-that-email#2",
    "b-john-which-closed#2",
}


async def _desk(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, model: OpenAIChatModel | None = None
) -> SupportAgent:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, chat_model=model)
    await desk.start()
    return desk


async def _wrong_turns(desk: SupportAgent, convs: list[Conversation], prefix: str) -> dict[str, str]:
    wrong: dict[str, str] = {}
    for conv in convs:
        for index, turn in enumerate(conv.turns):
            result = await desk.ask(turn.text, session_id=f"{prefix}-{conv.id}")
            key = f"{conv.id}#{index + 1}"
            found = problems(turn, result.route, result.answer)
            carried = [t for t in result.notes if t.get("node") == "followup"]
            if turn.carry is False and carried:
                found.append(f"carried {carried[0]['carried']!r} into a topic change")
            if turn.carry and not carried and key not in KNOWN_LIMITS:
                found.append("nothing carried")
            if found:
                wrong[key] = f"{turn.text!r}: {'; '.join(found)} → {result.answer!r}"
    return wrong


def test_the_set_has_enough_conversations_of_each_kind() -> None:
    assert len(CONVERSATIONS) >= 60
    assert all(2 <= len(c.turns) <= 5 for c in CONVERSATIONS)
    carries = [t for c in CONVERSATIONS for t in c.turns if t.carry]
    switches = [t for c in CONVERSATIONS for t in c.turns if t.carry is False]
    assert len(carries) >= 60 and len(switches) >= 30
    assert {c.split for c in CONVERSATIONS} == {"dev", "test1", "test2"}


@pytest.mark.integration
async def test_the_multi_turn_set_offline(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = await _desk(db, encoder, semantic)
    wrong = await _wrong_turns(desk, CONVERSATIONS, "off")
    unexpected = {k: v for k, v in wrong.items() if k not in KNOWN_LIMITS}
    assert not unexpected, "\n".join(f"{k} {v}" for k, v in unexpected.items())
    assert set(wrong) == KNOWN_LIMITS, f"a known limit is answered right now: {KNOWN_LIMITS - set(wrong)}"


@pytest.mark.integration
async def test_the_multi_turn_set_with_the_scripted_model(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    with ScriptedOpenAIServer(fallback=model_responder) as server:
        model = OpenAIChatModel(model=server.model, api_key=server.api_key, base_url=server.base_url, max_retries=0)
        try:
            desk = await _desk(db, encoder, semantic, model)
            wrong = await _wrong_turns(desk, CONVERSATIONS, "llm")
        finally:
            await model.aclose()
        assert not server.failures
        sql_prompts = [r.content("user") or "" for r in server.chat_requests if r.json_mode]
    unexpected = {k: v for k, v in wrong.items() if k not in KNOWN_LIMITS}
    assert not unexpected, "\n".join(f"{k} {v}" for k, v in unexpected.items())
    # the text-to-SQL prompt of a follow-up says what was carried (the model never saw a bare "he")
    assert any(
        "question: And which city is customer 1 from?" in p
        and "resolved from the conversation: the user wrote “And which city is he from?”; read with customer 1" in p
        for p in sql_prompts
    )


@pytest.mark.integration
async def test_the_issue_examples_and_what_the_route_event_says(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = await _desk(db, encoder, semantic)
    await desk.ask("What is the status of ticket 1?", session_id="issue-a")
    events = [e async for e in desk.iter("And which city is he from?", session_id="issue-a")]
    chosen, final = events[0], final_of(events)
    assert isinstance(chosen, RouteChosen)
    assert final.answer == "John Doe (customer 1) is from New York."
    assert chosen.route == "POSTGRES" and chosen.why.endswith("; follow-up: customer 1, from turn 1")
    assert {
        "node": "followup",
        "carried": "customer 1, from turn 1",
        "read_as": "And which city is customer 1 from?",
    } in final.notes
    tool = next(t for t in final.notes if t.get("node") == "postgres")
    assert tool["call"]["params"] == {"id": 1}

    await desk.ask("status of ticket 3", session_id="issue-b")
    who = await desk.ask("who is the customer?", session_id="issue-b")
    assert who.answer == "Jane Smith (customer 2) is from London."
    assert {"node": "followup", "carried": "customer 2, from turn 1", "read_as": "Who is customer 2?"} in who.notes


@pytest.mark.integration
async def test_a_topic_change_carries_nothing(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = await _desk(db, encoder, semantic)
    await desk.ask("What is the status of ticket 1?", session_id="switch")
    events = [e async for e in desk.iter("How do I reset my password?", session_id="switch")]
    chosen, final = events[0], final_of(events)
    assert isinstance(chosen, RouteChosen)
    assert final.route == "VECTOR" and "follow-up" not in chosen.why
    assert not [t for t in final.notes if t.get("node") == "followup"]


@pytest.mark.integration
async def test_the_turn_numbers_count_past_the_memory_window(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = await _desk(db, encoder, semantic)
    for _ in range(6):  # 12 messages: the first turn is no longer remembered
        await desk.ask("hello", session_id="count")
    await desk.ask("status of ticket 2", session_id="count")  # turn 7
    await desk.ask("thanks", session_id="count")
    result = await desk.ask("where does he live?", session_id="count")
    assert result.answer == "John Doe (customer 1) is from New York."
    assert any(t.get("carried") == "customer 1, from turn 7" for t in result.notes)


@asynccontextmanager
async def _old_schema(pg_url: str) -> AsyncIterator[SupportDatabase]:
    schema = f"o_{uuid.uuid4().hex[:12]}"
    db = SupportDatabase(pg_url, schema=schema, max_size=2)
    await db.open()
    try:
        async with db.connection() as conn:
            await conn.execute(f"CREATE SCHEMA {schema}")
            await conn.execute(  # the table as it was before it kept a context
                "CREATE TABLE support_messages (id bigserial PRIMARY KEY, session_id text NOT NULL,"
                " role text NOT NULL CHECK (role IN ('user', 'assistant')), content text NOT NULL,"
                " created_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
            await conn.execute(
                "INSERT INTO support_messages (session_id, role, content) VALUES"
                " ('old', 'user', 'What is the status of ticket 3?'),"
                " ('old', 'assistant', 'Ticket 3 for Jane Smith is about “Billing question” and its status is open.')"
            )
        yield db
    finally:
        async with db.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await db.close()


@pytest.mark.integration
async def test_an_old_messages_table_is_upgraded_and_its_sessions_go_on(
    pg_url: str, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    async with _old_schema(pg_url) as db:
        desk = await _desk(db, encoder, semantic)
        await db.ensure_schema()  # twice: idempotent
        async with db.connection() as conn:
            cur = await conn.execute(
                "SELECT data_type FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name = 'support_messages' AND column_name = 'context'",
                (db.schema,),
            )
            assert await cur.fetchall() == [{"data_type": "jsonb"}]
        assert (await desk.history("old"))[0].content == "What is the status of ticket 3?"
        # the old session has no stored context: the turn is answered as before (no carry), then contexts start
        first = await desk.ask("Which city is customer 3 from?", session_id="old")
        assert first.answer == "Alex Brown (customer 3) is from Toronto."
        follow = await desk.ask("does he have any tickets?", session_id="old")
        assert any(t.get("carried") == "customer 3, from turn 2" for t in follow.notes)
        assert "couldn't find" in follow.answer


@pytest.mark.integration
async def test_a_bad_stored_context_is_ignored(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = await _desk(db, encoder, semantic)
    await desk.ask("status of ticket 3", session_id="bad")
    # someone wrote the row: a context that is not one. As every writer of a session's messages, it holds the
    # session's lock, from a process of its own (this desk's process keeps the history it holds the lock for)
    async with (
        SupportDatabase(db.url, schema=db.schema) as other,
        MessageStore(other).hold("bad", within=10.0),
        other.connection() as conn,
    ):
        await conn.execute(
            "UPDATE support_messages SET context = %s::jsonb WHERE session_id = 'bad' AND role = 'assistant'",
            (json.dumps({"turn": "one", "route": "POSTGRES", "customers": [{"id": "DROP"}]}),),
        )
    result = await desk.ask("who is the customer?", session_id="bad")
    assert result.stop_reason == "success"
    assert not [t for t in result.notes if t.get("node") == "followup"]


def test_the_questions_follow_ups_become_pass_the_guard() -> None:
    """The questions a follow-up is read as: the offline planner's SQL for each passes the guard."""
    config = builtin_config()
    planner = SqlPlanner(config)
    for message, kind, params in (
        ("Show the open tickets of customer 2", "children", {"id": 2}),
        ("What tickets has customer 1 opened?", "children", {"id": 1}),
        ("Who is customer 2?", "by_id", {"id": 2}),
    ):
        lookup = planner.plan(message)[0]
        assert lookup.kind == kind and dict(params).items() <= dict(lookup.params).items()
        checked = check_sql(lookup.query, dict(lookup.params), columns=config.readable_columns())
        assert checked.tables <= {"customers", "tickets"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_context = st.fixed_dictionaries(
    {"turn": st.integers(min_value=-2, max_value=10**6), "route": st.sampled_from(["POSTGRES", "VECTOR", "X"])},
    optional={
        "asked": st.sampled_from(["ticket", "customer", "customer_tickets", "weather", "nope"]),
        "tickets": st.lists(st.fixed_dictionaries({"id": st.integers(), "customer_id": st.integers() | st.none()})),
        "customers": st.lists(st.fixed_dictionaries({"id": st.integers() | st.none(), "name": st.text(max_size=30)})),
        "articles": st.lists(st.text(max_size=30)),
        "city": st.text(max_size=30),
        "extra": _json,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    message=st.text(min_size=1, max_size=200),
    contexts=st.lists(_context | _json, max_size=5),
)
def test_any_message_against_any_stored_context_reads_safely(message: str, contexts: list[object]) -> None:
    history = []
    for context in contexts:
        history += [
            Message("user", "x"),
            Message("assistant", "y", context=context if isinstance(context, dict) else None),
        ]
    found = resolve(message, history)
    assert found.turn >= 1
    if found.carried is None:
        assert found.text == message
    else:
        assert found.text.strip() and found.carried.rsplit(", from turn ", 1)[1].isdigit()
        SqlPlanner(builtin_config()).plan(found.text)  # whatever it reads as, the offline SQL source takes it


@pytest.mark.integration
async def test_a_fault_of_the_resolver_routes_the_message_as_it_is(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await _desk(db, encoder, semantic)
    await desk.ask("What is the status of ticket 1?", session_id="fault")

    def broken(message: str, history: object) -> None:
        raise RuntimeError("resolver bug")

    monkeypatch.setattr("routegate.apps.support.turn.resolve", broken)
    result = await desk.ask("Which city is customer 2 from?", session_id="fault")
    assert result.stop_reason == "success" and result.answer == "Jane Smith (customer 2) is from London."
    assert not [t for t in result.notes if t.get("node") == "followup"]
