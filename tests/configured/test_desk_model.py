"""The shop desk with a chat model (the scripted double): the model writes SQL from the allowlisted schema and the
same guard checks it; when the model fails, the offline planner answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.llm.errors import LLMTimeoutError
from routegate.settings import Settings
from routegate.testing import ScriptedChatModel


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
async def desk(
    shop_dir: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path, model: ScriptedChatModel
) -> AsyncIterator[SupportAgent]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, shop_dir, encoder=encoder, chat_model=model) as opened:
        yield opened
    model.assert_consumed()


def _sql(query: str, **params: object) -> str:
    return json.dumps({"query": query, "params": params})


async def test_model_written_sql_runs_through_the_guard(desk: SupportAgent, model: ScriptedChatModel) -> None:
    model.script(_sql("SELECT o.status FROM orders o WHERE o.id = :id", id=1042), "Order 1042 is open.")
    result = await desk.ask("What is the status of order 1042?", session_id="m-1")
    assert result.answer == "Order 1042 is open." and result.stop_reason == "success"
    tool = next(t for t in result.notes if t.get("node") == "postgres")
    assert tool["call"]["template"] == "llm"
    prompt = model.calls[0].content("system")
    assert prompt is not None and "customers(id integer, name text" in prompt
    assert "password_hash" not in prompt  # the model sees the allowlisted schema only
    evidence = model.calls[1].content("user")
    assert evidence is not None and '"status": "open"' in evidence


async def test_model_sql_reading_an_excluded_column_is_refused(desk: SupportAgent, model: ScriptedChatModel) -> None:
    model.script(_sql("SELECT c.password_hash FROM customers c WHERE c.id = :id", id=1), "I could not look that up.")
    result = await desk.ask("What is the password of customer 1?", session_id="m-2")
    assert result.fallback is not None and result.fallback.startswith("sql_refused:")
    assert result.stop_reason.startswith("unanswered:sql_refused:")
    evidence = model.calls[1].content("user")
    assert evidence is not None and "x1$" not in evidence  # no hash reached the model


async def test_a_failing_model_leaves_the_offline_planner(desk: SupportAgent, model: ScriptedChatModel) -> None:
    model.script(LLMTimeoutError("no answer"), LLMTimeoutError("no answer"))
    result = await desk.ask("Who placed order 1042?", session_id="m-3")
    assert result.answer == "The customer of order 1042: Maria Garcia (customer 1)."
    assert result.fallback == "llm_unavailable" and result.stop_reason == "success"


def test_ask_with_desk_against_the_scripted_openai_server(
    shop_dir: Path, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real client path (the openai SDK over loopback): the model's SQL is checked by the desk's guard, the
    refused one never reaches the database, and the answer is the model's."""
    from routegate.cli import main
    from routegate.testing import ScriptedOpenAIServer
    from routegate.testing.steps import Reply

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path))
    script = [
        Reply(_sql("SELECT o.total FROM orders o WHERE o.id = :id", id=1049)),
        Reply("Order 1049 came to 238 euros."),
        Reply(_sql("SELECT c.password_hash FROM customers c")),
        Reply("I can't share that."),
    ]
    with ScriptedOpenAIServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["ask", "--desk", str(shop_dir), "What was the total of order 1049?", "--json"]) == 0
        first = json.loads(capsys.readouterr().out)
        assert first["answer"] == "Order 1049 came to 238 euros." and first["route"] == "POSTGRES"
        assert main(["ask", "--desk", str(shop_dir), "Show the password hashes of customers", "--json"]) == 1
        second = json.loads(capsys.readouterr().out)
        assert second["stop_reason"].startswith("unanswered:sql_refused:")
        evidence = server.requests[1].messages[-1]["content"]
        assert '"total": 238' in evidence
        assert all("x1$" not in str(r.body) for r in server.requests)
