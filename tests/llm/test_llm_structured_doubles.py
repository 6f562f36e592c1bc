"""The scripted server speaks tool calls and JSON schemas in the wire format the openai SDK parses, refuses a
format as the servers that lack it do, and plays a weak model."""

from __future__ import annotations

import json

import openai
import pytest

from routegate.llm import LLMModeRefusedError, OpenAIChatModel
from routegate.llm.structured import SchemaFormat, ToolCall, ToolsFormat, ToolSpec
from routegate.testing import Reply, ScriptedChatModel, ScriptedOpenAIServer, ToolCallReply, WeakModel
from routegate.testing.weak_model import misspelt

OPEN = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": name, "description": "d", "parameters": OPEN, "strict": True}}
    for name in ("lookup", "refund")
]
HI = [{"role": "user", "content": "hi"}]


def _client(server: ScriptedOpenAIServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)


async def test_tool_calls_parse_with_the_sdk_plain_and_streamed() -> None:
    reply = ToolCallReply(
        (("lookup", {"customer": "Anna Müller", "limit": 3}), ("refund", '{"amount": 4.5}')), piece_chars=5
    )
    with ScriptedOpenAIServer([reply, reply]) as server:
        async with _client(server) as client:
            plain = await client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="required")  # type: ignore[arg-type]
            async with client.chat.completions.stream(model="m", messages=HI, tools=TOOLS) as stream:  # type: ignore[arg-type]
                deltas = [event async for event in stream if event.type == "tool_calls.function.arguments.delta"]
                streamed = await stream.get_final_completion()
    for completion in (plain, streamed):
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert [(c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
            ("lookup", json.dumps({"customer": "Anna Müller", "limit": 3})),
            ("refund", '{"amount": 4.5}'),
        ]
        assert calls[0].id != calls[1].id
    assert len(deltas) > 4  # the arguments came in pieces


async def test_respond_reads_tool_calls_and_schema_answers(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(ToolCallReply((("lookup", {"q": 1}),), content="calling"), Reply('{"route": {}}'))
    tools = ToolsFormat((ToolSpec("lookup", "find", {"type": "object"}),))
    reply = await model.respond(HI, output=tools)  # type: ignore[arg-type]
    assert reply.text == "calling" and reply.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("lookup", '{"q": 1}')]
    schema = SchemaFormat("route", {"type": "object", "properties": {}, "required": [], "additionalProperties": False})
    answer = await model.respond(HI, output=schema)  # type: ignore[arg-type]
    assert answer.text == '{"route": {}}' and answer.tool_calls == ()
    tools_call, schema_call = server.chat_requests
    assert tools_call.body["tools"] == [tools.tools[0].to_dict()] and tools_call.body["tool_choice"] == "required"
    assert schema_call.body["response_format"] == schema.to_dict()


@pytest.mark.parametrize(
    ("dialect", "status", "says"),
    [
        ("vllm", 400, "--enable-auto-tool-choice"),
        ("llamacpp", 500, "--jinja"),
        ("ollama", 400, "does not support tools"),
        ("openai", 400, "not supported"),
    ],
)
async def test_a_server_without_tools_refuses_them_as_the_real_one_does(dialect: str, status: int, says: str) -> None:
    with ScriptedOpenAIServer(lacks=("tools",), dialect=dialect) as server:  # type: ignore[arg-type]
        async with _client(server) as client:
            with pytest.raises(openai.APIStatusError) as raised:
                await client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="required")  # type: ignore[arg-type]
    assert raised.value.status_code == status
    assert says in raised.value.message
    assert server.remaining == 0 and len(server.chat_requests) == 1  # refused before any step


async def test_an_ollama_without_json_schema_ignores_it() -> None:
    seen = []

    def step(request):  # type: ignore[no-untyped-def]
        seen.append(request.output_mode)
        return Reply("plain text, no schema")

    with ScriptedOpenAIServer([step], lacks=("json_schema",), dialect="ollama") as server:
        async with OpenAIChatModel(model="m", api_key="k", base_url=server.base_url) as chat:
            reply = await chat.respond(HI, output=SchemaFormat("r", {"type": "object"}))  # type: ignore[arg-type]
    assert reply.text == "plain text, no schema"
    assert seen == ["text"]  # the responder saw the request as the server treated it
    assert server.chat_requests[0].output_mode == "json_schema"  # the record keeps what was sent


async def test_a_remembered_refusal_is_not_asked_again() -> None:
    with ScriptedOpenAIServer(lacks=("tools",), dialect="vllm") as server:
        async with OpenAIChatModel(model="m", api_key="k", base_url=server.base_url) as chat:
            tools = ToolsFormat((ToolSpec("a", "", {"type": "object"}),))
            for remembered in (False, True):
                with pytest.raises(LLMModeRefusedError) as raised:
                    await chat.respond(HI, output=tools)  # type: ignore[arg-type]
                assert raised.value.remembered is remembered
                assert raised.value.stop_reason == "llm_error:bad_request"
    assert len(server.chat_requests) == 1


def _weak(**options: float) -> WeakModel:
    return WeakModel(lambda goal: ("POSTGRES", {"query": goal}), **options)  # type: ignore[arg-type]


def _request(server_body: dict[str, object], goal: str):  # type: ignore[no-untyped-def]
    from routegate.testing import RecordedRequest

    body = {"messages": [{"role": "user", "content": json.dumps({"goal": goal})}], **server_body}
    return RecordedRequest("POST", "/v1/chat/completions", {}, body)


def test_the_weak_model_faults_a_set_share_of_questions_the_same_in_every_format() -> None:
    weak = _weak(misspell=0.2, prose=0.1, seed=7)
    goals = [f"question {i}" for i in range(2000)]
    faults = [weak.fault(g) for g in goals]
    assert 0.17 < faults.count("misspell") / len(goals) < 0.23
    assert 0.07 < faults.count("prose") / len(goals) < 0.13
    assert faults == [_weak(misspell=0.2, prose=0.1, seed=7).fault(g) for g in goals]  # seeded
    assert faults != [_weak(misspell=0.2, prose=0.1, seed=8).fault(g) for g in goals]


def test_the_weak_model_answers_in_the_format_asked_and_constrained_formats_hold_it() -> None:
    always_misspelt = _weak(misspell=1.0)
    tools = {"tools": [{"type": "function", "function": {"name": "POSTGRES", "parameters": {}}}]}
    text = always_misspelt(_request({"response_format": {"type": "json_object"}}, "g"))
    assert isinstance(text, Reply) and json.loads(text.content or "") == {
        "kind": "route",
        "target": "POSTGRES",
        "args": {"qeury": "g"},
    }
    held_json = _weak(prose=1.0)(_request({"response_format": {"type": "json_object"}}, "g"))
    assert isinstance(held_json, Reply) and json.loads(held_json.content or "")["target"] == "POSTGRES"  # JSON mode
    wordy_text = _weak(prose=1.0)(_request({}, "g"))  # no format asked: nothing holds it
    assert isinstance(wordy_text, Reply) and (wordy_text.content or "").startswith("Sure!")
    held = always_misspelt(_request(tools, "g"))
    assert held == ToolCallReply((("POSTGRES", {"query": "g"}),))  # constrained decoding: no fault
    loose = WeakModel(always_misspelt.answer, misspell=1.0, constrained=())(_request(tools, "g"))
    assert loose == ToolCallReply((("POSTGRES", {"qeury": "g"}),))
    wordy = WeakModel(always_misspelt.answer, prose=1.0, constrained=())(_request(tools, "g"))
    assert isinstance(wordy, Reply) and wordy.content and wordy.content.startswith("I would send this to POSTGRES.")
    schema = {"type": "object", "properties": {"route": {}}}
    strict = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "route", "schema": schema, "strict": True}}
    }
    answer = _weak(prose=1.0)(_request(strict, "g"))
    assert isinstance(answer, Reply) and json.loads(answer.content or "")["route"]["args"] == {"query": "g"}
    assert misspelt("id") == "id_" and misspelt("ticket") == "tciket"


async def test_the_in_process_double_answers_respond() -> None:
    tools = ToolsFormat((ToolSpec("a", "", {"type": "object"}),))
    from routegate.llm.structured import ModelReply

    chat = ScriptedChatModel([ModelReply(tool_calls=(ToolCall("a", "{}"),)), "text"])
    assert (await chat.respond(HI, output=tools)).tool_calls == (ToolCall("a", "{}"),)  # type: ignore[arg-type]
    assert (await chat.respond(HI, output=tools)).text == "text"  # type: ignore[arg-type]
    assert [c.output for c in chat.calls] == [tools, tools]
    chat.script(ModelReply(text="x"))
    with pytest.raises(TypeError, match="respond takes those"):
        await chat.complete(HI)  # type: ignore[arg-type]
