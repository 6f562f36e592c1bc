"""`routegate triage`: the seed's example from the command line, offline."""

from __future__ import annotations

import json

import pytest

from routegate.cli import main
from routegate.testing import Reply, ScriptedOpenAIServer


def test_triage_default_goal_prints_the_billing_refund(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "ok"
    assert result["stop_reason"] == "success"
    assert result["selected_route"] == "billing_specialist"
    assert result["history"][-1]["observation"]["result"]["refund_amount_usd"] == 49.0
    assert {"answer", "trace", "history"} <= result.keys()


def test_triage_technical_incident(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "--compact", "Incident: API error rate is up"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out)["selected_route"] == "technical_specialist"


def test_triage_stop_exits_non_zero_with_the_stop_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "hello there"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "stopped"
    assert result["stop_reason"] == "no_route:no_rule_matched"
    assert result["phase"] == "route"


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "triage" in capsys.readouterr().err


def test_triage_uses_the_configured_llm_endpoint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    route = {"kind": "route", "target": "sales_specialist", "args": {"ticket": "a quote for 12 seats"}}
    with ScriptedOpenAIServer(model="scripted") as server:
        server.script(Reply(json.dumps(route)), Reply("Sales recommends team_plus at 199.00 USD a month."))
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_MODEL", "scripted")
        assert main(["triage", "a quote for 12 seats"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert len(server.chat_requests) == 2
    assert result["selected_route"] == "sales_specialist"
    assert result["answer"] == "Sales recommends team_plus at 199.00 USD a month."
    assert result["trace"][0]["decided_by"] == "llm"


def test_triage_offline_flag_ignores_the_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert main(["triage", "--offline"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"][0]["decided_by"] == "rules"


def test_triage_bad_settings_are_a_clear_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_TIMEOUT_SECONDS", "soon")
    assert main(["triage"]) == 2
    assert "OPENAI_TIMEOUT_SECONDS" in capsys.readouterr().err
