"""`routegate triage`: the seed's example from the command line, offline."""

from __future__ import annotations

import json

import pytest

from routegate.cli import main


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
