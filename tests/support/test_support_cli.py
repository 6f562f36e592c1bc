"""``routegate ask`` / ``routegate route`` end to end (``ask`` against the session's embedded PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routegate.apps.support.data import WEATHER_ANSWER
from routegate.cli import main


@pytest.fixture(autouse=True)
def _data_dir(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(data_dir))


def test_route_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "Explain ticket escalation", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "VECTOR"
    assert out["layer"] == "rules"
    assert out["policy"] == "allowed"


def test_route_file_gives_one_line_per_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "q.jsonl"
    lines = [
        {"text": "What is the status of ticket 12?", "route": "POSTGRES"},
        {"text": "What is your refund policy?"},
        {"text": "What is the price of Bitcoin?"},
        {"text": "What can you do?"},
    ]
    queries.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    assert main(["route", "--file", str(queries), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["route"] for o in out] == ["POSTGRES", "VECTOR", "EXTERNAL", "LLM"]
    assert out[0]["expected"] == "POSTGRES" and out[0]["correct"] is True
    assert all("scores" in o and "why" in o for o in out)


@pytest.mark.parametrize("content", ["not json\n", '{"txt": "x"}\n', "[1, 2]\n"])
def test_route_file_with_bad_lines_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    queries = tmp_path / "bad.jsonl"
    queries.write_text(content, encoding="utf-8")
    assert main(["route", "--file", str(queries)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_route_file_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "--file", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_route_needs_a_message_or_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route"]) == 2
    assert "either a message or --file" in capsys.readouterr().err


@pytest.mark.integration
def test_ask_json_against_postgres(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert main(["ask", "What's the weather today?", "--json", "--session", "cli-test"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "EXTERNAL"
    assert out["answer"] == WEATHER_ANSWER
    assert out["stop_reason"] == "success"
    assert out["fallback"] is None
    assert out["trace"][0]["node"] == "router"
    assert main(["ask", "What is the status of ticket 12?", "--session", "cli-test"]) == 0
    printed = capsys.readouterr().out
    assert "ticket 12" in printed
