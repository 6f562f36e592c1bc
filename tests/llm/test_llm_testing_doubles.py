"""routegate.testing: the scripted server and in-process doubles fail loudly and record what they were asked."""

from __future__ import annotations

import openai
import pytest

from routegate.apps.triage import build_triage_agent
from routegate.llm import LLMTimeoutError, OpenAIChatModel
from routegate.testing import (
    EmbeddingReply,
    ErrorReply,
    RecordedRequest,
    Reply,
    ScriptedChatModel,
    ScriptedOpenAIServer,
    ScriptedRouter,
    ScriptExhaustedError,
    ServerStep,
)

HI = [{"role": "user", "content": "hi"}]
ROUTE = {"kind": "route", "target": "billing_specialist", "args": {"ticket": "refund please"}}


def _client(server: ScriptedOpenAIServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=server.api_key, base_url=server.base_url, max_retries=0)


async def test_a_request_beyond_the_script_is_a_loud_failure(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(Reply("only one"))
    assert await model.complete(HI) == "only one"
    with pytest.raises(Exception, match="after the script ended"):
        await model.complete(HI)
    assert len(server.chat_requests) == 2  # HTTP 500 with x-should-retry: false — not retried
    assert len(server.failures) == 1
    with pytest.raises(AssertionError, match="unexpected request"):
        server.assert_consumed()
    server.clear_failures()


def test_unconsumed_steps_fail_the_with_block() -> None:
    with (
        pytest.raises(AssertionError, match=r"1 scripted step\(s\) never requested"),
        ScriptedOpenAIServer([Reply("never asked")]),
    ):
        pass


def test_an_exception_in_the_with_block_is_not_masked() -> None:
    with pytest.raises(KeyError), ScriptedOpenAIServer([Reply("never asked")]):
        raise KeyError("the test's own failure")


async def test_models_endpoint_lists_the_model_without_using_a_step(server: ScriptedOpenAIServer) -> None:
    client = _client(server)
    async with client:
        models = [m.id async for m in client.models.list()]
        one = await client.models.retrieve("scripted-model")
    assert models == ["scripted-model"]
    assert one.id == "scripted-model"
    assert server.remaining == 0


async def test_unknown_paths_are_recorded_failures(server: ScriptedOpenAIServer) -> None:
    client = _client(server)
    async with client:
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("other-model")
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="m", prompt="legacy")
    assert len(server.failures) == 2
    server.clear_failures()


async def test_embeddings_in_float_and_base64(server: ScriptedOpenAIServer) -> None:
    server.script(EmbeddingReply(), EmbeddingReply(vectors=((0.5, -0.5),)), EmbeddingReply())
    client = _client(server)
    async with client:
        hashed = await client.embeddings.create(model="e", input=["a", "b"], encoding_format="float")
        fixed = await client.embeddings.create(model="e", input="a")  # the SDK asks for base64 by default
        again = await client.embeddings.create(model="e", input=["a"], dimensions=4, encoding_format="float")
    assert [len(d.embedding) for d in hashed.data] == [8, 8]
    assert hashed.data[0].embedding != hashed.data[1].embedding
    assert abs(sum(v * v for v in hashed.data[0].embedding) - 1.0) < 1e-9
    assert fixed.data[0].embedding == [0.5, -0.5]  # sent as base64 float32, decoded by the SDK
    assert len(again.data[0].embedding) == 4
    assert server.requests[1].body["encoding_format"] == "base64"


async def test_a_step_can_be_computed_from_the_request(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    def echo(request: RecordedRequest) -> ServerStep:
        return Reply(f"you said {request.content('user')}")

    server.script(echo)
    assert await model.complete(HI) == "you said hi"


async def test_a_failing_responder_is_a_recorded_failure(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    def broken(request: RecordedRequest) -> ServerStep:
        raise ValueError("bug in the test's responder")

    server.script(broken)
    with pytest.raises(Exception, match="responder raised ValueError"):
        await model.complete(HI)
    assert server.failures == ["the scripted responder raised ValueError: bug in the test's responder"]
    server.clear_failures()


async def test_fallback_answers_beyond_the_script() -> None:
    with ScriptedOpenAIServer([Reply("first")], fallback=Reply("again")) as server:
        async with OpenAIChatModel(model="m", api_key="k", base_url=server.base_url) as chat:
            assert [await chat.complete(HI) for _ in range(3)] == ["first", "again", "again"]


async def test_wrong_step_kind_for_the_endpoint_is_a_failure(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(EmbeddingReply())
    with pytest.raises(Exception, match="got scripted EmbeddingReply"):
        await model.complete(HI)
    server.clear_failures()


async def test_usage_is_reported(server: ScriptedOpenAIServer) -> None:
    server.script(Reply("two words"), Reply("three small words"))
    client = _client(server)
    async with client:
        completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a b c"}])
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "a"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 2)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_error_reply_body_is_openai_shaped() -> None:
    body = ErrorReply(429).body()
    assert body == {
        "error": {
            "message": "Rate limit reached for requests.",
            "type": "rate_limit_exceeded",
            "param": None,
            "code": None,
        }
    }
    assert ErrorReply(502).body()["error"]["type"] == "server_error"


# -- in-process doubles ----------------------------------------------------------------------------------------
async def test_scripted_chat_model_answers_records_and_checks() -> None:
    chat = ScriptedChatModel(["one", LLMTimeoutError("scripted"), lambda messages: messages[-1]["content"].upper()])
    assert await chat.complete(HI, json_mode=True) == "one"
    with pytest.raises(LLMTimeoutError):
        await chat.complete(HI)
    assert [d async for d in chat.stream(HI)] == ["HI"]
    assert [(c.json_mode, c.stream) for c in chat.calls] == [(True, False), (False, False), (False, True)]
    assert chat.calls[0].content("user") == "hi"
    assert chat.calls[0].content("system") is None
    chat.assert_consumed()
    with pytest.raises(ScriptExhaustedError, match="called 4 time"):
        await chat.complete(HI)
    with pytest.raises(AssertionError, match="called 4 time"):
        chat.assert_consumed()


async def test_scripted_chat_model_streams_word_by_word_and_flags_leftovers() -> None:
    chat = ScriptedChatModel()
    chat.script("a b  c", "left over")
    assert [d async for d in chat.stream(HI)] == ["a ", "b ", " ", "c"]
    assert chat.remaining == 1
    with pytest.raises(AssertionError, match=r"1 scripted step\(s\) never used"):
        chat.assert_consumed()


async def test_scripted_chat_model_refuses_a_non_text_step() -> None:
    chat = ScriptedChatModel([lambda messages: 42])  # type: ignore[list-item, return-value]
    with pytest.raises(TypeError, match="must give a str"):
        await chat.complete(HI)


async def test_scripted_router_drives_the_core_agent() -> None:
    router = ScriptedRouter(["not json", ROUTE])
    agent = build_triage_agent(router=router)
    first = await agent.arun("I want a refund")
    assert (first.stop_reason, first.raw_route) == ("invalid_route:non_json", "not json")
    second = await agent.arun("I want a refund")
    assert second.stop_reason == "success"
    assert second.trace[0].decided_by == "scripted"
    assert [r.goal for r in router.requests] == ["I want a refund"] * 2
    router.assert_consumed()
    third = await agent.arun("I want a refund")
    assert third.stop_reason == "router_error:ScriptExhaustedError"
    with pytest.raises(AssertionError, match="ScriptedRouter was called 3 time"):
        router.assert_consumed()


async def test_scripted_router_passes_decisions_exceptions_and_functions() -> None:
    from routegate.core import RouteDecision
    from routegate.errors import RunStopError

    decision = RouteDecision(raw=ROUTE, decided_by="custom")
    router = ScriptedRouter([decision, RunStopError("no_route:scripted"), lambda request: {**ROUTE}])
    agent = build_triage_agent(router=router)
    assert (await agent.arun("refund")).trace[0].decided_by == "custom"
    stopped = await agent.arun("refund")
    assert (stopped.stop_reason, stopped.phase) == ("no_route:scripted", "route")
    assert (await agent.arun("refund")).stop_reason == "success"
    router.script(ROUTE)
    assert router.remaining == 1
    assert (await agent.arun("refund")).ok


async def test_chunks_make_the_plain_content_too(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply(chunks=("Hel", "lo")))
    assert await model.complete(HI) == "Hello"
    assert Reply(chunks=("a",)).text == "a"
    assert Reply("x", chunks=("y",)).text == "x"
