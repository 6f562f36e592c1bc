"""OpenAIChatModel: configuration, the error → stop-reason map, streaming, and answers no server should send."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from routegate.errors import ConfigurationError, RunStopError
from routegate.llm import (
    ChatModel,
    LLMAuthError,
    LLMBadRequestError,
    LLMError,
    LLMRateLimitedError,
    LLMTimeoutError,
    LLMUpstreamError,
    OpenAIChatModel,
)
from routegate.settings import Settings
from routegate.testing import ErrorReply, RawReply, Reply, ScriptedOpenAIServer

HI = [{"role": "user", "content": "hi"}]


def test_it_is_a_chat_model() -> None:
    assert isinstance(OpenAIChatModel(model="m", api_key="k"), ChatModel)


async def test_from_settings_uses_the_openai_variables(server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        openai_api_key=SecretStr("sk-test"),
        openai_base_url=server.base_url + "/",
        openai_model="my-model",
        openai_timeout_seconds=7.5,
        openai_max_retries=1,
    )
    async with OpenAIChatModel.from_settings(settings) as chat:
        assert (chat.model, chat.base_url, chat.timeout, chat.max_retries) == ("my-model", server.base_url, 7.5, 1)
        server.script(Reply("ok"))
        assert await chat.complete(HI) == "ok"
    request = server.chat_requests[0]
    assert request.model == "my-model"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert "sk-test" not in repr(chat)


def test_from_settings_defaults_to_the_openai_endpoint() -> None:
    chat = OpenAIChatModel.from_settings(Settings(openai_api_key=SecretStr("k"), openai_model="gpt-4.1-mini"))
    assert chat.base_url == "https://api.openai.com/v1"
    assert chat.model == "gpt-4.1-mini"


@pytest.mark.parametrize("key", [None, SecretStr(""), SecretStr("   ")])
def test_from_settings_without_a_key_is_a_configuration_error(key: SecretStr | None) -> None:
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatModel.from_settings(Settings(openai_api_key=key))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": " "}, "model name"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"timeout": float("inf")}, "finite"),
        ({"timeout": True}, "finite"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 1.5}, "max_retries"),
    ],
)
def test_bad_configuration_is_refused_early(kwargs: dict[str, object], match: str) -> None:
    arguments: dict[str, object] = {"model": "m", "api_key": "k", **kwargs}
    with pytest.raises(ConfigurationError, match=match):
        OpenAIChatModel(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([], "at least one message"),
        ([{"role": "robot", "content": "x"}], "role must be system, user, assistant or tool"),
        ([{"role": "tool", "content": "x"}], "tool_call_id must name the call"),
        ([{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]}], "each call is"),
        ([{"role": "assistant", "content": "", "tool_calls": "f()"}], "tool_calls must be a list"),
        ([{"role": "user", "content": 3}], "content must be a str"),
    ],
)
async def test_bad_messages_are_refused_before_any_request(
    model: OpenAIChatModel, messages: list[dict[str, object]], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        await model.complete(messages)  # type: ignore[arg-type]


async def test_all_roles_are_sent(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply("fine"))
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
    ]
    assert await model.complete(messages, temperature=0.5) == "fine"  # type: ignore[arg-type]
    request = server.chat_requests[0]
    assert request.messages == messages
    assert request.body["temperature"] == 0.5
    assert not request.json_mode


async def test_a_tool_conversation_is_sent_as_the_chat_api_takes_it(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """An assistant message's calls and each tool's result go out in the API's own form (the calls under
    ``function``, the result with the id of the call it answers), so a model can read what its tools returned."""
    server.script(Reply("done"))
    messages = [
        {"role": "user", "content": "pay the bill"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "read", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"amount": 5}'},
    ]
    assert await model.complete(messages) == "done"  # type: ignore[arg-type]
    sent = server.chat_requests[0].messages
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": '{"amount": 5}'}


@pytest.mark.parametrize(
    ("status", "error", "reason", "requests"),
    [
        (400, LLMBadRequestError, "llm_error:bad_request", 1),
        (401, LLMAuthError, "llm_error:auth", 1),
        (403, LLMAuthError, "llm_error:auth", 1),
        (404, LLMBadRequestError, "llm_error:bad_request", 1),
        (408, LLMTimeoutError, "llm_timeout", 3),
        (422, LLMBadRequestError, "llm_error:bad_request", 1),
        (429, LLMRateLimitedError, "llm_error:rate_limited", 3),
        (500, LLMUpstreamError, "llm_error:upstream", 3),
        (503, LLMUpstreamError, "llm_error:upstream", 3),
    ],
)
async def test_http_errors_map_to_stop_reasons(
    server: ScriptedOpenAIServer,
    model: OpenAIChatModel,
    status: int,
    error: type[LLMError],
    reason: str,
    requests: int,
) -> None:
    server.script(*[ErrorReply(status, message=f"scripted {status}")] * requests)
    with pytest.raises(error) as caught:
        await model.complete(HI)
    stop = caught.value
    assert isinstance(stop, RunStopError)
    assert stop.stop_reason == reason
    assert stop.status_code == status
    assert stop.phase is None  # the runtime fills in the phase it was in
    assert f"HTTP {status}: scripted {status}" in stop.message
    assert len(server.chat_requests) == requests


async def test_server_can_forbid_retries(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(ErrorReply(500, headers={"x-should-retry": "false"}))
    with pytest.raises(LLMUpstreamError):
        await model.complete(HI)
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json at all",
        b"{}",
        b'{"choices": "nope"}',
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": 7}, "finish_reason": "stop"}]}',
        b"[1, 2, 3]",
    ],
)
async def test_answers_that_are_not_chat_completions_are_upstream_errors(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, body: bytes
) -> None:
    server.script(RawReply(body))
    with pytest.raises(LLMUpstreamError):
        await model.complete(HI)


async def test_no_choices_is_an_empty_answer(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(RawReply(json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode()))
    assert await model.complete(HI) == ""


async def test_stream_yields_the_deltas(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply("The refund is 49 USD."), Reply(chunks=("Hel", "", "lo")))
    deltas = [delta async for delta in model.stream(HI)]
    assert deltas == ["The ", "refund ", "is ", "49 ", "USD."]
    assert [delta async for delta in model.stream(HI)] == ["Hel", "lo"]
    assert all(request.stream for request in server.chat_requests)


async def test_stream_errors_map_to_stop_reasons(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(ErrorReply(401))
    with pytest.raises(LLMAuthError):
        [delta async for delta in model.stream(HI)]


async def test_stream_error_event_is_an_upstream_error(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    event = json.dumps({"error": {"message": "model overloaded", "type": "server_error"}})
    server.script(RawReply(f"data: {event}\n\n".encode(), content_type="text/event-stream"))
    with pytest.raises(LLMUpstreamError, match="model overloaded"):
        [delta async for delta in model.stream(HI)]
