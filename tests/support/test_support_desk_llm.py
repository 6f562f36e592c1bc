"""The desk with a chat model configured (scripted in-process double): LLM answers streamed from the evidence,
text-to-SQL through the same guard, and the composer taking over when the model fails."""

from __future__ import annotations

import json

import pytest

from routegate.apps.support.contracts import AnswerToken
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from routegate.llm import ChatMessage, LLMTimeoutError
from routegate.testing import ScriptedChatModel
from support.turn_events import final_of

pytestmark = pytest.mark.integration


async def _desk(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, model: ScriptedChatModel
) -> SupportAgent:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, chat_model=model)
    await desk.start()
    return desk


def _evidence(messages: list[ChatMessage] | tuple[ChatMessage, ...]) -> dict[str, object]:
    last = messages[-1]["content"]
    return dict(json.loads(last.split("Evidence (JSON):\n", 1)[1]))


async def test_llm_answer_is_streamed_from_the_evidence(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    model = ScriptedChatModel(["Reset it with the Forgot Password link."])
    desk = await _desk(db, encoder, semantic, model)
    events = [e async for e in desk.iter("How do I reset my password?", session_id="llm1")]
    final = final_of(events)
    assert final.route == "VECTOR" and final.answer == "Reset it with the Forgot Password link."
    assert len([e for e in events if isinstance(e, AnswerToken)]) > 1
    evidence = _evidence(model.calls[0].messages)
    assert evidence["route"] == "VECTOR"
    documents = evidence["result"]["documents"]  # type: ignore[index]  # JSON evidence
    assert documents[0]["title"] == "Password Reset Guide"
    assert {"node": "respond", "mode": "llm"} in final.notes
    model.assert_consumed()


async def test_memory_reaches_the_model(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    model = ScriptedChatModel(["first answer", "second answer"])
    desk = await _desk(db, encoder, semantic, model)
    await desk.ask("hello", session_id="mem-llm")
    await desk.ask("thanks", session_id="mem-llm")
    second = model.calls[1].messages
    assert [m["role"] for m in second[1:3]] == ["user", "assistant"]
    assert second[1]["content"] == "hello" and second[2]["content"] == "first answer"


async def test_model_failure_before_the_first_token_falls_back_to_the_composer(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    model = ScriptedChatModel([LLMTimeoutError("no answer in time")])
    desk = await _desk(db, encoder, semantic, model)
    result = await desk.ask("What's the weather today?", session_id="llm-fail")
    assert result.stop_reason == "success"
    assert result.answer == "The weather today is sunny with a temperature of 25°C."
    assert {"node": "respond", "llm_failed": "llm_timeout", "mode": "composer"} in result.notes


async def test_text_to_sql_runs_through_the_guard(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    sql = {"query": "SELECT name, city FROM customers WHERE id = :id", "params": {"id": 3}}
    model = ScriptedChatModel([json.dumps(sql), "Alex Brown lives in Toronto."])
    desk = await _desk(db, encoder, semantic, model)
    result = await desk.ask("Which city is customer 3 from?", session_id="t2s")
    assert result.route == "POSTGRES" and result.fallback is None
    assert model.calls[0].json_mode
    evidence = _evidence(model.calls[1].messages)
    assert evidence["result"] == {
        "rows": [{"name": "Alex Brown", "city": "Toronto"}],
        "row_count": 1,
        "truncated": False,
    }


async def test_hostile_sql_from_the_model_is_refused_and_falls_back(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    model = ScriptedChatModel([json.dumps({"query": "DELETE FROM tickets", "params": {}}), "Sorry."])
    desk = await _desk(db, encoder, semantic, model)
    result = await desk.ask("Show tickets for customer John", session_id="t2s-bad")
    assert result.route == "POSTGRES"
    assert result.fallback == "sql_refused:not_select"
    async with db.connection() as conn:
        count = await (await conn.execute("SELECT count(*) AS n FROM tickets")).fetchone()
    assert count == {"n": 3}
