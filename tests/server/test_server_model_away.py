"""The server around the real desk whose model is configured but unreachable (a closed loopback port): ``/chat``
(JSON and SSE) and ``/v1`` answer with the offline answer and ``fallback: llm_unavailable``; ``/healthz`` and
``/metrics`` say the model is down; after the first failure no turn makes a connection attempt."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI

from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.llm import OpenAIChatModel
from routegate.server.testing import ServerThread, free_port, parse_sse, support_desk_app
from routegate.settings import Settings
from routegate.testing.network import CountingTransport, closed_port
from routegate_process import start_routegate

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

QUESTION = "What is the status of ticket 1?"
JSON = {"Accept": "application/json"}


@pytest.fixture
def away(pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer) -> Iterator[tuple[str, CountingTransport]]:
    """A server whose desk has a model at a closed port; yields its URL and the model's counting transport."""
    transport = CountingTransport()

    @asynccontextmanager
    async def app() -> AsyncIterator[FastAPI]:
        base = f"http://127.0.0.1:{closed_port()}/v1"
        model = OpenAIChatModel(model="m", api_key="sk-x", base_url=base, transport=transport)
        async with (
            model,
            support_desk_app(
                pg_url, settings=Settings(), encoder=encoder, semantic=semantic, chat_model=model
            ) as built,
        ):
            yield built

    with ServerThread(app_factory=app) as server:
        yield server.url, transport


@pytest.fixture
def offline(start_real_server: Callable[..., ServerThread]) -> str:
    return start_real_server().url


def test_chat_and_v1_answer_offline_and_health_says_the_model_is_down(
    away: tuple[str, CountingTransport], offline: str
) -> None:
    url, transport = away
    with httpx.Client(base_url=url, timeout=30) as c, httpx.Client(base_url=offline, timeout=30) as o:
        health = c.get("/healthz")
        assert health.status_code == 200 and health.json()["model"] == "ok"
        expected = o.post("/chat", json={"message": QUESTION}, headers=JSON).json()
        assert o.get("/healthz").json() == {"status": "ok", "database": "ok", "detail": "", "model": "off"}

        first = c.post("/chat", json={"message": QUESTION}, headers=JSON).json()
        assert transport.attempts == 1  # text-to-SQL tried once, no retries; Respond found the breaker open
        assert (first["answer"], first["route"]) == (expected["answer"], expected["route"])
        assert (first["stop_reason"], first["fallback"]) == ("success", "llm_unavailable")

        streamed = parse_sse(c.post("/chat", json={"message": QUESTION}).text)
        final = streamed[-1][1]
        assert (final["answer"], final["fallback"], final["stop_reason"]) == (
            expected["answer"],
            "llm_unavailable",
            "success",
        )
        with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30) as ai:
            completion = ai.chat.completions.create(model="routegate", messages=[{"role": "user", "content": QUESTION}])
        assert completion.choices[0].message.content == expected["answer"]
        extension = (completion.model_extra or {})["routegate"]
        assert (extension["fallback"], extension["stop_reason"]) == ("llm_unavailable", "success")
        assert transport.attempts == 1  # the breaker-open turns made no connection attempt

        health = c.get("/healthz")
        assert health.status_code == 200  # the desk still serves, offline
        assert health.json()["status"] == "degraded" and health.json()["model"] == "down"
        metrics = c.get("/metrics").text
        assert 'routegate_model_state{state="down"} 1.0' in metrics
        assert 'routegate_model_state{state="ok"} 0.0' in metrics
        assert 'routegate_fallbacks_total{reason="llm_unavailable",route="POSTGRES"} 3.0' in metrics


def test_serve_says_at_start_that_the_model_is_unreachable(pg_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = dict(
        os.environ,
        ROUTEGATE_DATA_DIR=str(tmp_path),
        DATABASE_URL=pg_url,
        OPENAI_API_KEY="sk-x",
        OPENAI_BASE_URL=f"http://127.0.0.1:{closed_port()}/v1",
        PYTHONUNBUFFERED="1",
    )
    proc, lines = start_routegate(["serve", "--port", str(port)], env, within=120)
    try:
        text = "".join(lines)
        assert "WARNING: the chat model 'gpt-4.1-mini'" in text and "is unreachable (llm_error:connect)" in text
        assert "The desk answers offline until it answers" in text
        url = f"http://127.0.0.1:{port}"
        health = httpx.get(f"{url}/healthz", timeout=10).json()
        assert (health["status"], health["model"]) == ("degraded", "down")  # the probe opened the breaker
        answer = httpx.post(f"{url}/chat", json={"message": QUESTION}, headers=JSON, timeout=30).json()
        assert (answer["fallback"], answer["stop_reason"]) == ("llm_unavailable", "success")
        assert "Login not working" in answer["answer"]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=60)
