"""The LLM finalizer's structured data beside the answer: asked in the strongest format, validated, on the result."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel

from routegate.apps.triage import DEMO_GOAL, build_triage_agent
from routegate.core import FinalAnswer, FinalizeRequest
from routegate.errors import ConfigurationError
from routegate.llm import LLMFinalizer, LLMModeRefusedError
from routegate.llm.structured import ModelReply, SchemaFormat, ToolCall, ToolsFormat
from routegate.testing import ScriptedChatModel, ScriptedRouter


class Refund(BaseModel):
    amount_usd: float
    eligible: bool
    note: str | None = None


REQUEST = FinalizeRequest(goal="refund?", selected_route="billing_specialist", history=())
ANSWER = {"answer": "  You get 49 USD back.  ", "extra": {"amount_usd": 49.0, "eligible": True}}


async def test_json_mode_asks_for_a_json_object_with_the_schema() -> None:
    chat = ScriptedChatModel([json.dumps(ANSWER)])
    final = await LLMFinalizer(chat, extra=Refund).finalize(REQUEST)
    assert final == FinalAnswer("You get 49 USD back.", {"amount_usd": 49.0, "eligible": True, "note": None})
    call = chat.calls[0]
    assert call.json_mode and call.output is None
    assert '"amount_usd"' in (call.content("system") or "")


async def test_tools_mode_reads_the_final_answer_call() -> None:
    chat = ScriptedChatModel([ModelReply(tool_calls=(ToolCall("final_answer", json.dumps(ANSWER)),))])
    final = await LLMFinalizer(chat, extra=Refund, mode="tools").finalize(REQUEST)
    assert isinstance(final, FinalAnswer) and final.extra["amount_usd"] == 49.0
    output = chat.calls[0].output
    assert isinstance(output, ToolsFormat) and output.tools[0].name == "final_answer"
    assert output.tools[0].parameters["properties"]["extra"]["properties"]["eligible"] == {
        "title": "Eligible",
        "type": "boolean",
    }


async def test_json_schema_mode_is_strict_and_its_nulls_are_read_back() -> None:
    answer = {"answer": "ok", "extra": {"amount_usd": 1.5, "eligible": False, "note": None}}
    chat = ScriptedChatModel([json.dumps(answer)])
    final = await LLMFinalizer(chat, extra=Refund, mode="json_schema").finalize(REQUEST)
    assert isinstance(final, FinalAnswer) and final.extra == {"amount_usd": 1.5, "eligible": False, "note": None}
    output = chat.calls[0].output
    assert isinstance(output, SchemaFormat) and output.strict
    assert output.schema["properties"]["extra"]["required"] == ["amount_usd", "eligible", "note"]


async def test_a_refused_mode_falls_back() -> None:
    chat = ScriptedChatModel([LLMModeRefusedError("no tools", mode="tools"), json.dumps(ANSWER)])
    final = await LLMFinalizer(chat, extra=Refund, mode="auto").finalize(REQUEST)
    assert isinstance(final, FinalAnswer)
    assert [type(c.output).__name__ for c in chat.calls] == ["ToolsFormat", "SchemaFormat"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (json.dumps({"answer": "ok", "extra": {"amount_usd": "lots", "eligible": True}}), "extra.*amount_usd"),
        (json.dumps({"answer": 3, "extra": {}}), "int, not text"),
        ("Here you go: {}", "not the JSON object"),
        ("[1]", "JSON list"),
    ],
)
async def test_data_that_does_not_fit_stops_the_run(text: str, says: str) -> None:
    agent = build_triage_agent(
        router=ScriptedRouter([{"kind": "route", "target": "billing_specialist", "args": {"ticket": DEMO_GOAL}}]),
        finalizer=LLMFinalizer(ScriptedChatModel([text]), extra=Refund),
    )
    result = await agent.arun(DEMO_GOAL)
    assert (result.stop_reason, result.phase) == ("llm_error:bad_output", "finalize")
    assert re.search(says, result.message.replace("'", ""))


async def test_the_data_lands_on_the_result_and_a_blank_answer_is_still_llm_empty() -> None:
    route = {"kind": "route", "target": "billing_specialist", "args": {"ticket": DEMO_GOAL}}
    agent = build_triage_agent(
        router=ScriptedRouter([route]), finalizer=LLMFinalizer(ScriptedChatModel([json.dumps(ANSWER)]), extra=Refund)
    )
    result = await agent.arun(DEMO_GOAL)
    assert result.stop_reason == "success" and result.extra["amount_usd"] == 49.0
    blank = {"answer": "  ", "extra": ANSWER["extra"]}
    agent = build_triage_agent(
        router=ScriptedRouter([route]), finalizer=LLMFinalizer(ScriptedChatModel([json.dumps(blank)]), extra=Refund)
    )
    assert (await agent.arun(DEMO_GOAL)).stop_reason == "llm_empty"


def test_a_mode_without_extra_and_a_bad_extra_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="give extra="):
        LLMFinalizer(ScriptedChatModel(), mode="tools")
    with pytest.raises(ConfigurationError, match="pydantic model class"):
        LLMFinalizer(ScriptedChatModel(), extra=dict)  # type: ignore[arg-type]
