"""The endpoint's answer is read at most ``max_response_bytes`` far, from outside: an OpenAI-compatible server on
loopback that floods its answer (a completion's body, or a stream) counts what it could send before the client
stopped reading; the call ends with ``llm_error:upstream`` saying why, and a compressed answer (whose size says
nothing of what it expands to) is not read."""

from __future__ import annotations

import gzip

import pytest

from flood_server import FloodServer, kernel_slack
from routegate.errors import ConfigurationError
from routegate.llm import OpenAIChatModel
from routegate.llm.errors import LLMUpstreamError
from routegate.llm.openai_chat import MAX_RESPONSE_BYTES

LIMIT = 1024 * 1024


def _model(url: str) -> OpenAIChatModel:
    return OpenAIChatModel(
        model="m", api_key="k", base_url=f"{url}/v1", timeout=60.0, max_retries=0, max_response_bytes=LIMIT
    )


async def _ask(model: OpenAIChatModel, *, streamed: bool) -> str:
    if not streamed:
        return await model.complete([{"role": "user", "content": "hi"}])
    return "".join([delta async for delta in model.stream([{"role": "user", "content": "hi"}])])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_flooding_answer_is_cut_where_the_client_stops_reading(streamed: bool) -> None:
    bound = LIMIT + kernel_slack()
    flood = FloodServer(
        4 * bound,
        content_type="text/event-stream" if streamed else "application/json",
        chunk=b'data: {"choices": []}\n\n' * 512 if streamed else b" " * 16384,
    )
    try:
        async with _model(flood.url) as model:
            with pytest.raises(LLMUpstreamError) as failed:
                await _ask(model, streamed=streamed)
        assert flood.done.wait(60)
    finally:
        flood.close()
    assert failed.value.stop_reason == "llm_error:upstream"
    assert f"over {LIMIT} bytes" in str(failed.value) and "max_response_bytes" in str(failed.value)
    [sent] = flood.sent
    assert sent <= bound < flood.body_bytes, f"the client read {sent} bytes of a {flood.body_bytes}-byte answer"


@pytest.mark.timeout(120)
async def test_a_compressed_answer_is_not_expanded() -> None:
    body = gzip.compress(b'{"id": "x", "object": "chat.completion", "choices": []}')
    flood = FloodServer(len(body), content_type="application/json", headers="content-encoding: gzip\r\n", chunk=body)
    try:
        async with _model(flood.url) as model:
            with pytest.raises(LLMUpstreamError, match="compressed"):
                await model.complete([{"role": "user", "content": "hi"}])
    finally:
        flood.close()


def test_the_bound_is_checked_when_the_model_is_built() -> None:
    assert OpenAIChatModel(model="m", api_key="k").max_response_bytes == MAX_RESPONSE_BYTES == 32 * 1024 * 1024
    with pytest.raises(ConfigurationError, match="max_response_bytes must be an integer >= 1024"):
        OpenAIChatModel(model="m", api_key="k", max_response_bytes=10)
