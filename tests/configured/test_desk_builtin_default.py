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
    capsys: pytest.CaptureFixture[str],
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


def test_the_builtin_configurations_fitted_layer_is_cached_in_the_data_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desk = ["--desk", str(builtin_desk_dir())]
    first = _routes(desk, capsys)
    cached = sorted(p.name for p in tmp_path.glob("support-router-*"))
    assert len(cached) == 1 and (tmp_path / cached[0] / "manifest.json").is_file()
    assert _routes(desk, capsys) == first  # loaded from the cache: the same routes, no second entry
    assert sorted(p.name for p in tmp_path.glob("support-router-*")) == cached
