"""``--desk`` and ``ROUTEGATE_DESK`` on ``ask`` and ``route``: the configured desk instead of the built-in one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routegate.cli import main

ROUTES = Path(__file__).resolve().parents[1] / "data" / "shop_routes.jsonl"


@pytest.fixture(autouse=True)
def _env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path))


def test_ask_with_desk(shop_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--desk", str(shop_dir), "What is the status of order 1042?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "POSTGRES" and out["answer"] == "Order 1042: status is open."


def test_ask_with_routegate_desk(
    shop_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROUTEGATE_DESK", str(shop_dir))
    assert main(["ask", "Can I return socks?"]) == 0
    assert capsys.readouterr().out.startswith("From docs/returns.md")


def test_route_file_with_desk(shop_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "--desk", str(shop_dir), "--file", str(ROUTES)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) >= 100 and all(line["policy"] == "allowed" for line in lines)
    accuracy = sum(line["correct"] for line in lines) / len(lines)
    assert accuracy >= 0.93


def test_a_missing_desk_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--desk", str(tmp_path / "nope"), "hello"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "desk.toml does not exist" in err and "routegate desk init" in err


def test_route_never_offers_a_kind_the_desk_lacks(shop_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "--desk", str(shop_dir), "What is the price of bitcoin today?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] != "EXTERNAL"  # the shop has no tool


def test_desk_eval_reports_accuracy_and_misroutes(shop_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["desk", "eval", str(shop_dir), str(ROUTES), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] >= 100 and report["accuracy"] >= 0.93
    assert set(report["per_route"]) == {"POSTGRES", "VECTOR", "LLM"}
    assert len(report["misroutes"]) == report["total"] - report["correct"]


def test_desk_eval_refuses_a_bad_label(shop_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "hi", "route": "SQL"}\n', encoding="utf-8")
    assert main(["desk", "eval", str(shop_dir), str(bad)]) == 2
    assert "line 1: needs" in capsys.readouterr().err


def test_chat_with_desk_remembers_the_conversation(
    shop_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    lines = "Which country is Maria Garcia from?\nAnd which city is she from?\n/quit\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert main(["chat", "--desk", str(shop_dir)]) == 0
    out = capsys.readouterr().out
    assert "country is Spain" in out and "city is Madrid" in out
