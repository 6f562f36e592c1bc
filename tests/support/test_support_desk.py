"""The whole graph on the real embedded PostgreSQL: every example query of the spec, fallbacks, memory, events."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from routegate.apps.support.contracts import (
    AnswerToken,
    Message,
    RouteChosen,
    SupportDesk,
    ToolUsed,
    TurnError,
    TurnResult,
)
from routegate.apps.support.data import ARTICLES, CRYPTO_ANSWER, WEATHER_ANSWER
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MemoEncoder, MiniLMEncoder
from routegate.embed.protocol import Vectors
from routegate.embed.wrapper import EncoderWrapper
from support.turn_events import final_of

pytestmark = pytest.mark.integration


@pytest.fixture
async def desk(db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> SupportAgent:
    agent = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await agent.start()
    return agent


def test_the_agent_implements_the_contract(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    assert isinstance(SupportAgent(db=db, encoder=encoder), SupportDesk)


@pytest.mark.parametrize(
    ("query", "route", "expected"),
    [
        ("Show tickets for customer John", "POSTGRES", ["Login not working", "Password reset issue"]),
        ("Which city is customer 3 from?", "POSTGRES", ["Alex Brown", "Toronto"]),
        ("How do I reset my password?", "VECTOR", [ARTICLES[0].content]),
        ("What is your refund policy?", "VECTOR", [ARTICLES[2].content]),
        ("Explain ticket escalation", "VECTOR", [ARTICLES[1].content]),
        ("What’s the weather today?", "EXTERNAL", [WEATHER_ANSWER]),
        ("What is the price of Bitcoin?", "EXTERNAL", [CRYPTO_ANSWER]),
        ("Give me today’s temperature in London", "EXTERNAL", [WEATHER_ANSWER]),
        ("Can you help me?", "LLM", ["support desk"]),
        ("What can you do?", "LLM", ["tickets"]),
        ("Explain this system", "LLM", ["help articles"]),
    ],
)
async def test_spec_examples_reach_their_route_and_content(
    desk: SupportAgent, query: str, route: str, expected: list[str]
) -> None:
    result = await desk.ask(query, session_id="spec")
    assert result.route == route
    assert result.stop_reason == "success"
    assert result.fallback is None
    for text in expected:
        assert text in result.answer


async def test_external_answer_is_exactly_the_mock_string(desk: SupportAgent) -> None:
    assert (await desk.ask("What's the weather today?", session_id="w")).answer == WEATHER_ANSWER


async def test_missing_ticket_falls_back_to_the_respond_node(desk: SupportAgent) -> None:
    result = await desk.ask("What is the status of ticket 12?", session_id="t12")
    assert result.route == "POSTGRES"
    assert result.fallback == "empty"
    assert result.stop_reason == "success"
    assert "ticket 12" in result.answer
    nodes = [entry.get("node") for entry in result.notes]
    assert nodes[0] == "router"
    assert "postgres" in nodes
    assert {"node": "respond", "mode": "composer"} in result.notes


async def test_irrelevant_help_question_falls_back(desk: SupportAgent) -> None:
    result = await desk.ask("How do I change my email address?", session_id="kb")
    assert result.route == "VECTOR"
    assert result.fallback == "empty"
    assert "help article" in result.answer


async def test_unknown_external_query_falls_back(desk: SupportAgent) -> None:
    result = await desk.ask("What is the price of Ethereum?", session_id="eth")
    assert result.route == "EXTERNAL"
    assert result.fallback == "empty"
    assert "$" not in result.answer


async def test_trace_says_which_layer_decided_with_scores(desk: SupportAgent) -> None:
    ruled = await desk.ask("Explain ticket escalation", session_id="tr")
    router = ruled.notes[0]
    assert router["node"] == "router" and router["layer"] == "rules"
    assert router["scores"]["rules:VECTOR"] >= 1
    gateway = next(e for e in ruled.notes if e.get("node") == "gateway")
    assert gateway["decided_by"] == "rules" and gateway["target"] == "VECTOR" and gateway["phase"] == "delegate"
    semantic = await desk.ask("I want my money back, is that possible?", session_id="tr2")
    assert semantic.notes[0]["layer"] in ("rules", "semantic")


async def test_events_arrive_in_order(desk: SupportAgent) -> None:
    events = [e async for e in desk.iter("Show tickets for customer John", session_id="ev")]
    kinds = [e.type for e in events]
    assert kinds[0] == "route" and kinds[1] == "tool" and kinds[-1] == "final"
    assert set(kinds[2:-1]) == {"token"}
    route, tool, final = events[0], events[1], final_of(events)
    assert isinstance(route, RouteChosen) and route.route == "POSTGRES" and route.layer == "rules"
    assert isinstance(tool, ToolUsed) and tool.tool == "postgres" and tool.ok and tool.summary == "2 rows"
    assert isinstance(final, TurnResult)
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == final.answer


async def test_llm_route_has_no_tool_event(desk: SupportAgent) -> None:
    kinds = [e.type async for e in desk.iter("hello", session_id="hi")]
    assert kinds[0] == "route" and "tool" not in kinds and kinds[-1] == "final"


async def test_memory_keeps_the_last_ten_messages_across_turns(desk: SupportAgent) -> None:
    for i in range(6):
        await desk.ask(f"What is the status of ticket {i + 1}?", session_id="mem")
    history = await desk.history("mem")
    assert len(history) == 10
    assert history[0].content == "What is the status of ticket 2?"
    assert [m.role for m in history] == ["user", "assistant"] * 5
    await desk.reset("mem")
    assert await desk.history("mem") == []


async def test_follow_up_uses_the_conversation(desk: SupportAgent) -> None:
    await desk.ask("Which city is customer 2 from?", session_id="follow")
    result = await desk.ask("Which tickets does she have?", session_id="follow")
    assert result.route == "POSTGRES"
    assert "Billing question" in result.answer


@pytest.mark.parametrize(
    ("message", "session_id", "code"),
    [("", "s", "empty_message"), ("   ", "s", "empty_message"), ("hi", "bad id", "bad_session_id")],
)
async def test_bad_input_gets_an_error_event(desk: SupportAgent, message: str, session_id: str, code: str) -> None:
    events = [e async for e in desk.iter(message, session_id=session_id)]
    assert len(events) == 1
    assert isinstance(events[0], TurnError) and events[0].code == code


async def test_healthy(desk: SupportAgent) -> None:
    assert await desk.healthy()


async def test_a_semantic_vector_turn_embeds_the_message_once(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    counting = _CountingEncoder(encoder)
    memo = MemoEncoder(counting)
    agent = SupportAgent(db=db, encoder=memo, semantic=FittedSemanticLayer.fit(memo))
    await agent.start()
    message = "I cannot log in to my account"
    result = await agent.ask(message, session_id="memo-1")
    router, *_ = (entry for entry in result.notes if entry.get("node") == "router")
    vector, *_ = (entry for entry in result.notes if entry.get("node") == "vector")
    assert (result.route, router["layer"]) == ("VECTOR", "semantic")  # the router embedded it ...
    assert vector["call"]["query"] == message  # ... and the vector tool searched with it
    assert counting.texts.count(message) == 1


class _CountingEncoder(EncoderWrapper):
    """The session MiniLM, recording every text it embeds."""

    def __init__(self, inner: MiniLMEncoder) -> None:
        super().__init__(inner)
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return self.inner.encode(texts)


async def test_the_kb_query_is_embedded_while_the_memory_read_runs(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = _CountingEncoder(encoder)
    agent = SupportAgent(db=db, encoder=MemoEncoder(counting), semantic=semantic)
    await agent.start()
    message = "How do I reset my password?"
    assert agent.router is not None and agent.router.texts_to_embed(message) == (message,)
    memory_read_may_finish = asyncio.Event()
    recent = agent.memory.recent

    async def slow_recent(session_id: str) -> list[Message]:
        await memory_read_may_finish.wait()
        return await recent(session_id)

    monkeypatch.setattr(agent.memory, "recent", slow_recent)
    turn = asyncio.create_task(agent.ask(message, session_id="prefetch-1"))
    for _ in range(2000):  # bounded: the prefetch reaches the encoder (on a worker thread) well before this ends
        if message in counting.texts:
            break
        await asyncio.sleep(0.005)
    assert message in counting.texts and not memory_read_may_finish.is_set()
    memory_read_may_finish.set()
    result = await turn
    assert result.route == "VECTOR" and counting.texts.count(message) == 1


def test_what_a_turn_will_embed(desk: SupportAgent) -> None:
    router = desk.router
    assert router is not None
    assert router.texts_to_embed("What is the status of ticket 2?") == ()  # rules: POSTGRES, no embedding
    assert router.texts_to_embed("Can you  help me?") == ()  # rules: LLM
    assert router.texts_to_embed("How do   I reset my password?") == ("How do I reset my password?",)
    assert router.texts_to_embed("I was charged twice") == ("I was charged twice",)  # the embedding layer decides
