"""The real ``openai`` client (stream and non-stream) against /v1 on a running server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import openai
import pytest

from routegate.server.testing import FakeSupportDesk, ServerThread

pytestmark = pytest.mark.e2e

StartServer = Callable[..., ServerThread]


@pytest.fixture
def ai(server: ServerThread) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def test_models(ai: openai.OpenAI) -> None:
    assert [m.id for m in ai.models.list()] == ["routegate-support"]


def test_non_stream_completion_uses_the_user_as_session(ai: openai.OpenAI, desk: FakeSupportDesk) -> None:
    completion = ai.chat.completions.create(
        model="routegate-support",
        messages=[
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "Which city is customer 3 from?"},
        ],
        user="oa-1",
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "[POSTGRES] answer to: Which city is customer 3 from?"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    extra = completion.model_extra or {}
    assert extra["routegate"]["route"] == "POSTGRES"
    assert extra["routegate"]["session_id"] == "oa-1"
    assert [m.content for m in desk.histories["oa-1"]] == [
        "Which city is customer 3 from?",
        "[POSTGRES] answer to: Which city is customer 3 from?",
    ]


def test_stream_completion(ai: openai.OpenAI) -> None:
    stream = ai.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "What is the price of Bitcoin?"}], stream=True
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "[EXTERNAL] answer to: What is the price of Bitcoin?"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len({c.id for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_session_from_header(ai: openai.OpenAI, desk: FakeSupportDesk) -> None:
    ai.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], extra_headers={"X-Session-Id": "hdr-1"}
    )
    assert len(desk.histories["hdr-1"]) == 2


def test_api_key_is_the_bearer(start_server: StartServer) -> None:
    server = start_server(server_api_key="k-123")
    with (
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0) as bad,
        pytest.raises(openai.AuthenticationError, match="the API key is not valid"),
    ):
        bad.models.list()
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="k-123", max_retries=0) as good:
        assert good.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]).choices


def test_bad_requests_are_clear(ai: openai.OpenAI, desk: FakeSupportDesk) -> None:
    with pytest.raises(openai.UnprocessableEntityError, match="the last message must have role 'user'"):
        ai.chat.completions.create(model="m", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(openai.UnprocessableEntityError, match="message is empty"):
        ai.chat.completions.create(model="m", messages=[{"role": "user", "content": " "}])
    with pytest.raises(openai.UnprocessableEntityError, match="messages: List should have at least 1 item"):
        ai.chat.completions.create(model="m", messages=[])
    assert desk.histories == {}


def test_database_down_is_503(ai: openai.OpenAI, desk: FakeSupportDesk) -> None:
    desk.database_up = False
    with pytest.raises(openai.InternalServerError, match="database is unavailable"):
        ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "ticket 1"}])
    with pytest.raises(openai.InternalServerError, match="database is unavailable"):
        list(ai.chat.completions.create(model="m", messages=[{"role": "user", "content": "ticket 1"}], stream=True))


def test_content_parts_are_joined(ai: openai.OpenAI) -> None:
    completion = ai.chat.completions.create(
        model="m",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "weather "}, {"type": "text", "text": "today"}]}
        ],
    )
    assert completion.choices[0].message.content == "[EXTERNAL] answer to: weather today"


def test_without_a_session_the_clients_conversation_goes_to_the_desk(ai: openai.OpenAI, desk: FakeSupportDesk) -> None:
    completion = ai.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "be terse"},
            {"role": "user", "content": "Which city is customer 2 from?"},
            {"role": "assistant", "content": "London."},
            {"role": "tool", "content": "{}", "tool_call_id": "t1"},
            {"role": "user", "content": [{"type": "text", "text": "and his "}, {"type": "text", "text": "tickets?"}]},
        ],
    )
    session = (completion.model_extra or {})["routegate"]["session_id"]
    # the user's and the assistant's text before the last message: no system, developer or tool message
    assert [(m.role, m.content) for m in desk.supplied[session]] == [
        ("user", "Which city is customer 2 from?"),
        ("assistant", "London."),
    ]
    assert desk.histories[session][0].content == "and his tickets?"


@pytest.mark.parametrize("named", ["user", "header"])
def test_with_a_session_the_stored_conversation_wins(ai: openai.OpenAI, desk: FakeSupportDesk, named: str) -> None:
    ai.chat.completions.create(
        model="m",
        messages=[
            {"role": "user", "content": "Which city is customer 2 from?"},
            {"role": "user", "content": "and his?"},
        ],
        user="kept" if named == "user" else openai.omit,
        extra_headers={"X-Session-Id": "kept"} if named == "header" else None,
    )
    assert desk.supplied == {}  # nothing but the last message is read: the session's own history is the desk's
    assert desk.histories["kept"][0].content == "and his?"
