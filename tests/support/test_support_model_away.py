"""A model that is away never makes the desk worse than offline: with a real client pointed at a closed loopback
port, every turn gets the answer a desk with no model gives, says so (``fallback: llm_unavailable``), and after
the first failure makes no connection attempt (counted below the SDK). A turn that ends without an answer is
never ``success``. A failing encoder leaves what does not need it working."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.embed.protocol import Vectors
from routegate.llm import OpenAIChatModel
from routegate.testing.network import CountingTransport, closed_port

pytestmark = pytest.mark.integration

MESSAGES = [
    "What is the status of ticket 1?",  # rules → POSTGRES: text-to-SQL, then Respond
    "How do I reset my password?",  # rules → VECTOR: Respond
    "hello there",  # the LLM route: Respond
    "purple elephants dancing",  # no rule: the LLM router stage is asked, then Respond
    "What is the status of ticket 99?",  # found nothing: the offline "not found" answer
]


async def test_every_turn_gets_the_offline_answer_and_only_the_first_tries_the_model(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    transport = CountingTransport()
    base = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAIChatModel(model="m", api_key="sk-x", base_url=base, max_retries=2, transport=transport) as model:
        away = SupportAgent(db=db, encoder=encoder, semantic=semantic, chat_model=model)
        await away.start()
        offline = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await offline.start()
        assert away.model_health() == "ok" and offline.model_health() == "off"
        for n, message in enumerate(MESSAGES):
            before = transport.attempts
            got = await away.ask(message, session_id=f"away-{n}")
            expected = await offline.ask(message, session_id=f"offline-{n}")
            assert (got.route, got.answer) == (expected.route, expected.answer), message
            assert got.fallback == "llm_unavailable", message
            assert got.stop_reason == expected.stop_reason == "success", message
            assert {"node": "desk", "answered": "offline", "llm_failed": "llm_error:connect"} in got.notes
            assert transport.attempts == (1 if n == 0 else before), message  # breaker open: no attempt at all
            assert away.model_health() == "down"


async def test_a_turn_whose_tool_failed_is_not_a_success(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await desk.start()
    async with db.connection() as conn:
        await conn.execute("DROP TABLE tickets CASCADE")
    result = await desk.ask("What is the status of ticket 1?", session_id="no-table")
    assert result.fallback is not None and result.fallback.split(":")[0] in ("tool_error", "sql_refused")
    assert result.stop_reason == f"unanswered:{result.fallback}"
    assert not result.outcome.ok and result.phase == "delegate"
    assert "couldn't look that up" in result.answer


def test_ask_answers_offline_and_says_so(
    pg_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(data_dir))
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert main(["ask", "What is the status of ticket 1?", "--json", "--session", "cli-offline"]) == 0
    expected = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    assert main(["ask", "What is the status of ticket 1?", "--json", "--session", "cli-away"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert got["answer"] == expected["answer"] and "Login not working" in got["answer"]
    assert (got["stop_reason"], got["fallback"], expected["fallback"]) == ("success", "llm_unavailable", None)
    assert "answered offline: the language model did not answer (llm_error:connect)" in captured.err


class BreakableEncoder:
    """The real encoder until ``broken`` is set; then every call fails as a broken runtime would."""

    def __init__(self, inner: MiniLMEncoder) -> None:
        self.inner = inner
        self.broken = False

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def encode(self, texts: Sequence[str]) -> Vectors:
        if self.broken:
            raise RuntimeError("onnxruntime: the session failed")
        return self.inner.encode(texts)


async def test_a_failing_encoder_leaves_the_rules_and_the_database_working(
    db: SupportDatabase, encoder: MiniLMEncoder
) -> None:
    breakable = BreakableEncoder(encoder)
    desk = SupportAgent(db=db, encoder=breakable, semantic=ExampleEmbeddingLayer(breakable))
    await desk.start()
    offline = SupportAgent(db=db, encoder=encoder, semantic=ExampleEmbeddingLayer(encoder))
    await offline.start()
    breakable.broken = True
    unmatched = await desk.ask("purple elephants dancing", session_id="enc-1")
    assert (unmatched.route, unmatched.stop_reason, unmatched.fallback) == ("LLM", "success", "encoder_unavailable")
    assert unmatched.answer == (await offline.ask("purple elephants dancing", session_id="enc-o")).answer
    ticket = await desk.ask("What is the status of ticket 1?", session_id="enc-2")  # the rules route it
    assert (ticket.stop_reason, ticket.fallback) == ("success", None) and "Login not working" in ticket.answer
    article = await desk.ask("How do I reset my password?", session_id="enc-3")  # needs the encoder: no answer
    assert (article.route, article.fallback) == ("VECTOR", "tool_error:encoder_error")
    assert article.stop_reason == "unanswered:tool_error:encoder_error"
