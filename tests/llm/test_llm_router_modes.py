"""The LLM router's output modes end to end: the seed's triage agent, the real openai client, the scripted server.

Each mode routes through the same policy boundary: what a tool call or a strict-schema answer says is judged as
JSON text is (same stop reasons); an endpoint that lacks a mode is fallen back from, never a failed run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from routegate.apps.triage import DEMO_GOAL, build_triage_agent
from routegate.core import RunResult, TicketArgs
from routegate.errors import ConfigurationError
from routegate.llm import LLMFinalizer, OpenAIChatModel
from routegate.llm.prompts import ROUTER_SCHEMA_PROMPT, ROUTER_TOOLS_PROMPT
from routegate.llm.protocol import ChatMessage
from routegate.routers.llm import LLMRouter, RouterMode
from routegate.testing import Reply, ScriptedChatModel, ScriptedOpenAIServer, ToolCallReply
from routegate.testing.dialects import Dialect

ANSWER = "The billing specialist confirmed a refund of 49.00 USD."
BILLING = {"ticket": DEMO_GOAL}


async def _run(model: OpenAIChatModel, mode: RouterMode) -> RunResult:
    agent = build_triage_agent(router=LLMRouter(model, mode=mode), finalizer=LLMFinalizer(model))
    return await agent.arun(DEMO_GOAL)


def _answer(mode: str, target: str, args: Any, **extra: Any) -> Reply | ToolCallReply:
    """The model's route in ``mode``'s wire format (``extra``: keys beside kind/target/args)."""
    if mode == "tools":
        return ToolCallReply(((target, args),))
    route = {"kind": "route", "target": target, "args": args, **extra}
    return Reply(json.dumps({"route": route} if mode == "json_schema" else route))


@pytest.fixture
async def lacking(request: pytest.FixtureRequest) -> AsyncIterator[tuple[ScriptedOpenAIServer, OpenAIChatModel]]:
    lacks, dialect = request.param
    with ScriptedOpenAIServer(model="scripted-model", lacks=lacks, dialect=dialect) as server:
        async with OpenAIChatModel(
            model="scripted-model", api_key=server.api_key, base_url=server.base_url, timeout=30.0
        ) as chat:
            yield server, chat


async def test_tools_mode_routes_by_a_tool_call(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(_answer("tools", "billing_specialist", BILLING), Reply(ANSWER))
    result = await _run(model, "tools")
    assert result.stop_reason == "success"
    assert result.selected_route == "billing_specialist"
    assert result.trace[0].why == "the model called 'billing_specialist'"
    route_call = server.chat_requests[0]
    assert route_call.output_mode == "tools"
    assert route_call.body["tool_choice"] == "required"
    assert "response_format" not in route_call.body
    assert route_call.tool_names == ["billing_specialist", "technical_specialist", "sales_specialist"]
    # each tool's parameters are the worker's argument schema: the one the policy checks
    assert route_call.tools[0]["parameters"] == TicketArgs.model_json_schema()
    assert route_call.system_prompt == ROUTER_TOOLS_PROMPT
    assert "available_routes" not in route_call.user_json()  # the routes are the tools
    assert route_call.user_json()["goal"] == DEMO_GOAL


async def test_tools_mode_leaves_the_refused_target_out_of_the_next_attempt(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(
        _answer("tools", "technical_specialist", BILLING),  # not its domain: needs_reroute
        _answer("tools", "billing_specialist", BILLING),
        Reply(ANSWER),
    )
    result = await _run(model, "tools")
    assert result.stop_reason == "success"
    first, second = server.chat_requests[:2]
    assert "technical_specialist" in first.tool_names
    assert second.tool_names == ["billing_specialist", "sales_specialist"]
    assert second.user_json()["forbidden_targets"] == ["technical_specialist"]


async def test_json_schema_mode_routes_by_one_strict_schema(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(_answer("json_schema", "billing_specialist", BILLING), Reply(ANSWER))
    result = await _run(model, "json_schema")
    assert result.stop_reason == "success"
    assert result.trace[0].why == "the model chose 'billing_specialist'"
    route_call = server.chat_requests[0]
    assert route_call.output_mode == "json_schema"
    assert route_call.system_prompt == ROUTER_SCHEMA_PROMPT
    spec = route_call.json_schema
    assert spec is not None and spec["strict"] is True and spec["name"] == "route"
    schema = spec["schema"]
    assert schema["required"] == ["route"] and schema["additionalProperties"] is False
    branches = schema["properties"]["route"]["anyOf"]
    assert [b["properties"]["target"]["enum"] for b in branches] == [
        ["billing_specialist"],
        ["technical_specialist"],
        ["sales_specialist"],
    ]
    args = branches[0]["properties"]["args"]
    assert args == {
        "description": TicketArgs.model_json_schema()["description"],
        "type": "object",
        "properties": {"ticket": {"type": "string"}},
        "required": ["ticket"],
        "additionalProperties": False,
    }


# what a constrained model cannot say, an unconstrained endpoint still can: the policy judges it the same way
CASES = [
    pytest.param("billing_specialist", {"ticket": 42}, {}, "invalid_route:bad_args", id="wrong-arg-type"),
    pytest.param("billing_specialist", {"tikcet": DEMO_GOAL}, {}, "invalid_route:missing_ticket", id="misspelt-arg"),
    pytest.param("billing_specialist", {"ticket": DEMO_GOAL, "user": 42}, {}, "invalid_route:bad_args", id="extra-arg"),
    pytest.param("refund_bot", BILLING, {}, "invalid_route:route_not_allowed:refund_bot", id="unknown-target"),
    pytest.param("billing_specialist", "not an object", {}, "invalid_route:bad_args", id="args-not-an-object"),
]


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema"])
@pytest.mark.parametrize(("target", "args", "extra", "stop"), CASES)
async def test_a_constrained_model_is_still_untrusted(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, mode: str, target: str, args: Any, extra: Any, stop: str
) -> None:
    server.script(_answer(mode, target, args, **extra))
    result = await _run(model, mode)  # type: ignore[arg-type]  # the three modes of the parametrisation
    assert (result.stop_reason, result.phase) == (stop, "route")
    assert result.history == ()


@pytest.mark.parametrize("mode", ["json", "json_schema"])
async def test_extra_keys_beside_the_route_stop_as_in_json(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, mode: str
) -> None:
    server.script(_answer(mode, "billing_specialist", BILLING, confidence=0.9))
    result = await _run(model, mode)  # type: ignore[arg-type]
    assert result.stop_reason == "invalid_route:extra_keys"
    assert result.raw_route == {"kind": "route", "target": "billing_specialist", "args": BILLING, "confidence": 0.9}


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema"])
async def test_choosing_the_refused_target_again_stops_as_in_json(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, mode: str
) -> None:
    # an endpoint that does not hold the model to the tools offered: the second call names the forbidden target
    server.script(_answer(mode, "technical_specialist", BILLING), _answer(mode, "technical_specialist", BILLING))
    result = await _run(model, mode)  # type: ignore[arg-type]
    assert result.stop_reason == "invalid_route:repeat_target_after_reroute"
    assert result.raw_route == {"kind": "route", "target": "technical_specialist", "args": BILLING}


async def test_several_tool_calls_are_refused_as_one_decision_that_is_not_an_object(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(ToolCallReply((("billing_specialist", BILLING), ("sales_specialist", BILLING))))
    result = await _run(model, "tools")
    assert result.stop_reason == "invalid_route:not_object"
    assert "2 tools" in result.trace[0].why


@pytest.mark.parametrize(
    ("lacking", "fallback"),
    [
        ((("tools",), "vllm"), "json_schema"),
        ((("tools",), "ollama"), "json_schema"),
        ((("tools",), "llamacpp"), "json_schema"),
        ((("tools",), "openai"), "json_schema"),
        ((("tools", "json_schema"), "vllm"), "json"),
        ((("tools", "json_schema"), "llamacpp"), "json"),
        ((("tools", "json_schema"), "openai"), "json"),
    ],
    indirect=["lacking"],
)
async def test_an_endpoint_without_tools_is_fallen_back_from_once(
    lacking: tuple[ScriptedOpenAIServer, OpenAIChatModel], fallback: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, chat = lacking
    server.script(_answer(fallback, "billing_specialist", BILLING), Reply(ANSWER))
    with caplog.at_level(logging.WARNING, logger="routegate.routers.llm"):
        result = await _run(chat, "tools")
    assert result.stop_reason == "success"
    assert result.trace[0].why.startswith("tools refused by the endpoint; ")
    assert chat.health == "ok"  # a refused format is not an endpoint away: the breaker stays closed
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == len(server.lacks)  # one log line per refused format
    # the refusals are remembered: the next run asks in the accepted format straight away
    asked_first = len(server.chat_requests)
    server.script(_answer(fallback, "billing_specialist", BILLING), Reply(ANSWER))
    again = await _run(chat, "tools")
    assert again.stop_reason == "success"
    assert [r.output_mode for r in server.chat_requests[asked_first:]] == [fallback, "text"]
    assert "(earlier)" in again.trace[0].why


@pytest.mark.parametrize("lacking", [(("json_schema",), "vllm"), (("json_schema",), "openai")], indirect=True)
async def test_an_endpoint_without_json_schema_is_fallen_back_from(
    lacking: tuple[ScriptedOpenAIServer, OpenAIChatModel],
) -> None:
    server, chat = lacking
    server.script(_answer("json", "billing_specialist", BILLING), Reply(ANSWER))
    result = await _run(chat, "json_schema")
    assert result.stop_reason == "success"
    assert [r.output_mode for r in server.chat_requests] == ["json_schema", "json", "text"]
    assert result.trace[0].why == "json_schema refused by the endpoint; the model chose 'billing_specialist'"


@pytest.mark.parametrize("lacking", [(("tools",), "vllm")], indirect=True)
async def test_auto_takes_the_strongest_mode_the_endpoint_accepts(
    lacking: tuple[ScriptedOpenAIServer, OpenAIChatModel],
) -> None:
    server, chat = lacking
    server.script(_answer("json_schema", "billing_specialist", BILLING), Reply(ANSWER))
    assert (await _run(chat, "auto")).stop_reason == "success"
    assert [r.output_mode for r in server.chat_requests] == ["tools", "json_schema", "text"]
    assert set(chat.refused_modes) == {"tools"}


async def test_auto_asks_for_tools_first(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(_answer("tools", "billing_specialist", BILLING), Reply(ANSWER))
    assert (await _run(model, "auto")).stop_reason == "success"
    assert server.chat_requests[0].output_mode == "tools"


async def test_a_reply_without_the_tool_call_falls_back_for_that_call_only(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(
        Reply("I think billing_specialist is the one."),
        _answer("json_schema", "billing_specialist", BILLING),
        Reply(ANSWER),
    )
    result = await _run(model, "tools")
    assert result.stop_reason == "success"
    assert result.trace[0].why.startswith("tools: the model answered without a tool call (38 characters of text); ")
    assert model.refused_modes == {}  # a model's answer, not the endpoint's refusal: tools are asked again next time
    server.script(_answer("tools", "billing_specialist", BILLING), Reply(ANSWER))
    assert (await _run(model, "tools")).stop_reason == "success"
    assert server.chat_requests[-2].output_mode == "tools"


async def test_a_bare_400_falls_back_but_is_not_remembered(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    from routegate.testing import ErrorReply

    server.script(ErrorReply(400, "Invalid request."), _answer("json_schema", "billing_specialist", BILLING))
    server.script(Reply(ANSWER))
    assert (await _run(model, "tools")).stop_reason == "success"
    assert model.refused_modes == {}


async def test_json_mode_is_unchanged_by_the_modes(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(_answer("json", "billing_specialist", BILLING), Reply(ANSWER))
    result = await _run(model, "json")
    assert result.trace[0].why == "the model chose 'billing_specialist'"
    body = server.chat_requests[0].body
    assert set(body) == {"messages", "model", "temperature", "response_format"}
    assert body["response_format"] == {"type": "json_object"}


class _PlainModel:
    """A chat model with text answers only (no respond())."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        return self.text

    async def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        yield self.text


async def test_auto_with_a_text_only_model_is_json_and_the_structured_modes_refuse_it() -> None:
    plain = _PlainModel(json.dumps({"kind": "route", "target": "billing_specialist", "args": BILLING}))
    router = LLMRouter(plain, mode="auto")
    assert router.modes == ("json",)
    result = await build_triage_agent(router=router).arun(DEMO_GOAL)
    assert result.stop_reason == "success"
    for mode in ("tools", "json_schema"):
        with pytest.raises(ConfigurationError, match=f"mode='{mode}'.*respond"):
            LLMRouter(plain, mode=mode)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="mode must be one of"):
        LLMRouter(plain, mode="xml")  # type: ignore[arg-type]


async def test_a_catalogue_strict_mode_cannot_express_falls_back_to_json() -> None:
    from routegate.core import RouteRequest
    from routegate.core.contracts import RouteSpec

    chat = ScriptedChatModel([json.dumps({"kind": "route", "target": "free", "args": {"any": 1}})])
    catalog = (RouteSpec("free", "takes anything", {"type": "object", "additionalProperties": True}),)
    decision = await LLMRouter(chat, mode="json_schema").decide(RouteRequest(goal="g", catalog=catalog))
    assert decision.raw == {"kind": "route", "target": "free", "args": {"any": 1}}
    assert decision.why.startswith("json_schema skipped: route 'free': args: an open object")
    assert chat.calls[0].output is None and chat.calls[0].json_mode


@pytest.mark.parametrize("dialect", ["vllm", "llamacpp", "ollama", "openai"])
def test_every_dialect_refusal_is_read_as_a_refusal_by_the_client(dialect: Dialect) -> None:
    from routegate.llm._replies import refuses_mode
    from routegate.testing.dialects import refusal
    from routegate.testing.steps import ErrorReply, RawReply

    for mode in ("tools", "json_schema"):
        answer = refusal(dialect, mode, "m")  # type: ignore[arg-type]
        if answer is None:
            continue
        if isinstance(answer, RawReply):
            status, message = answer.status, json.loads(answer.body)["message"]
        else:
            assert isinstance(answer, ErrorReply)
            status, message = answer.status, answer.body()["error"]["message"]
        assert refuses_mode(mode, status, message), (dialect, mode)  # type: ignore[arg-type]
