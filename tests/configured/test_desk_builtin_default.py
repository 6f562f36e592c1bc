"""The built-in desk's configuration routes as the built-in desk does with each desk's own production layer:
``routegate route --file`` on the 204 labelled messages gives the same route, decided by the same layer, with and
without ``--desk <the built-in configuration>`` (both fit a semantic router on the same examples, cached in the data
directory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routegate.apps.configured.config import builtin_desk_dir
from routegate.cli import main

LABELLED = Path(__file__).resolve().parents[1] / "data" / "support_routes.jsonl"


@pytest.fixture(autouse=True)
def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DATABASE_URL", "ROUTEGATE_DESK", "ROUTEGATE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path))


def _routes(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    assert main(["route", *argv, "--file", str(LABELLED)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_the_builtin_configuration_routes_every_labelled_message_as_the_builtin_desk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builtin = _routes([], capsys)
    configured = _routes(["--desk", str(builtin_desk_dir())], capsys)
    assert len(builtin) == len(configured) == 204
    differ = [
        (b["text"], b["route"], b["layer"], c["route"], c["layer"])
        for b, c in zip(builtin, configured, strict=True)
        if (b["text"], b["route"], b["layer"]) != (c["text"], c["route"], c["layer"])
    ]
    assert differ == []
    assert {line["layer"] for line in configured} >= {"rules", "semantic"}  # both layers decide some of them
    assert len(list(tmp_path.glob("support-router-*"))) == 1  # one fitted router, one cache entry, for both


def test_the_builtin_configurations_fitted_layer_is_cached_in_the_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desk = ["--desk", str(builtin_desk_dir())]
    first = _routes(desk, capsys)
    cached = sorted(p.name for p in tmp_path.glob("support-router-*"))
    assert len(cached) == 1 and (tmp_path / cached[0] / "manifest.json").is_file()
    assert _routes(desk, capsys) == first  # loaded from the cache: the same routes, no second entry
    assert sorted(p.name for p in tmp_path.glob("support-router-*")) == cached


def test_the_default_desk_is_the_builtin_configuration_and_keeps_the_conversations_of_apps_support(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation the built-in desk (``apps.support``) held before the default became its configuration is
    continued by ``routegate ask`` without ``--desk``: the follow-up reads the turn kept in the schema ``support``."""
    import asyncio

    from routegate.apps.support.factory import open_support_desk
    from routegate.settings import Settings

    monkeypatch.setenv("DATABASE_URL", pg_url)

    async def before_the_upgrade() -> None:
        async with open_support_desk(Settings(database_url=pg_url, data_dir=tmp_path)) as desk:
            first = await desk.ask("Which city is customer 2 from?", session_id="upgrade-1")
            assert first.answer == "Jane Smith (customer 2) is from London."

    asyncio.run(before_the_upgrade())
    assert main(["ask", "--session", "upgrade-1", "--json", "Which tickets does she have?"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"] == "POSTGRES"
    assert out["answer"] == "Ticket 3 for Jane Smith is about “Billing question” and its status is open."
    assert main(["ask", "--desk", str(builtin_desk_dir()), "--session", "upgrade-1", "--json", "and her city?"]) == 0
    assert "London" in json.loads(capsys.readouterr().out)["answer"]  # --desk on it is the same desk, same memory
