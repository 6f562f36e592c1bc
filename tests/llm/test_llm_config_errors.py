"""Bad LLM configuration fails at start-up and names the variable; an unreachable endpoint is not a timeout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from routegate.errors import ConfigurationError
from routegate.llm import LLMConnectError, OpenAIChatModel
from routegate.llm.openai_chat import check_base_url
from routegate.settings import Settings
from routegate.testing import ScriptedOpenAIServer

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "localhost:11434/v1",
        "ftp://example.com/v1",
        "http://",
        "https:///v1",
        "http://host:0/v1",
        "file:///x",
    ],
)
def test_a_bad_base_url_is_refused_naming_the_variable(url: str) -> None:
    settings = Settings(openai_api_key=SecretStr("x"), openai_base_url=url)
    with pytest.raises(ConfigurationError, match="OPENAI_BASE_URL") as caught:
        OpenAIChatModel.from_settings(settings)
    assert repr(url) in str(caught.value)


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://localhost:11434/v1/", "http://localhost:11434/v1"),
        ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_good_base_urls_are_kept(url: str, kept: str) -> None:
    assert OpenAIChatModel(model="m", api_key="k", base_url=url).base_url == kept


@given(st.text(max_size=60))
def test_check_base_url_either_accepts_an_http_url_or_names_the_variable(text: str) -> None:
    problem: str | None = None
    try:
        url = check_base_url(text)
    except ConfigurationError as exc:
        problem = str(exc)
    if problem is None:
        assert url.startswith(("http://", "https://"))
    else:
        assert "OPENAI_BASE_URL" in problem


async def test_a_refused_connection_is_llm_error_connect() -> None:
    with ScriptedOpenAIServer() as gone:
        base_url = gone.base_url  # the port is closed once the server stopped
    async with OpenAIChatModel(model="m", api_key="k", base_url=base_url, max_retries=0, timeout=30.0) as chat:
        with pytest.raises(LLMConnectError) as caught:
            await chat.complete(HI)  # type: ignore[arg-type]
        with pytest.raises(LLMConnectError):
            async for _ in chat.stream(HI):  # type: ignore[arg-type]
                pass
    assert caught.value.stop_reason == "llm_error:connect"
    assert "OPENAI_BASE_URL" in caught.value.message
