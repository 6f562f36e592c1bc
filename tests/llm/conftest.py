"""Fixtures of the LLM suite: a scripted OpenAI-compatible server on loopback and a real client bound to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from routegate.llm import OpenAIChatModel
from routegate.testing import ScriptedOpenAIServer


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    """A started server with an empty script; tests add steps with ``server.script(...)``. Checked at teardown."""
    double = ScriptedOpenAIServer(model="scripted-model")
    with double:
        yield double


@pytest.fixture
async def model(server: ScriptedOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    """The real ``openai`` client path against ``server`` (a generous timeout: only Hang steps should hit it)."""
    async with OpenAIChatModel(
        model="scripted-model", api_key=server.api_key, base_url=server.base_url, timeout=30.0, max_retries=2
    ) as chat:
        yield chat
