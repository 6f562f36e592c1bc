"""The built-in desk answers as it always did: every example question of the contract, every conversation whose
answer text ``tests/support`` checks, and the 204 labelled messages of ``tests/data/support_routes.jsonl`` get the
route, the answer text, the stop reason and the fallback recorded in ``tests/data/support_builtin_answers.jsonl``
(what the built-in desk answered before it became a configuration of the one desk), turn by turn, with each kind of
embedding layer (the fitted one, the configuration's ``[router] fit_at_start``; the nearest examples). The desk runs
as the command line opens it (its configuration's two schemas) and on one database (``SupportAgent(db=...)``)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.support.contracts import TurnResult
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

RECORDED = Path(__file__).resolve().parents[1] / "data" / "support_builtin_answers.jsonl"
"""One line per turn: ``layer`` (``fitted`` | ``examples``), ``group`` (``contract`` | ``conversation`` |
``labelled``), ``session`` (a number: the turns of one session in order), ``message`` and what was answered."""


def _recorded(layer: str) -> dict[int, list[dict[str, object]]]:
    sessions: dict[int, list[dict[str, object]]] = {}
    for line in RECORDED.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["layer"] == layer:
            sessions.setdefault(row["session"], []).append(row)
    return sessions


@pytest.fixture(scope="module", params=["fitted", "examples"])
def layer_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture(scope="module")
def semantic(encoder: MiniLMEncoder, layer_kind: str) -> EmbeddingLayer:
    return FittedSemanticLayer.fit(encoder) if layer_kind == "fitted" else ExampleEmbeddingLayer(encoder)


@pytest.fixture(scope="module")
def builtin_dir(layer_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in configuration, or a copy of it routing with the nearest examples."""
    if layer_kind == "fitted":
        return builtin_desk_dir()
    copy = Path(shutil.copytree(builtin_desk_dir(), tmp_path_factory.mktemp("builtin-examples") / "support"))
    toml = copy / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert "fit_at_start = true\n" in text
    toml.write_text(text.replace("fit_at_start = true\n", "fit_at_start = false\n"), encoding="utf-8")
    return copy


@pytest.fixture
async def on_one_database(pg_url: str, encoder: MiniLMEncoder, semantic: EmbeddingLayer) -> AsyncIterator[SupportAgent]:
    schema = f"w_{uuid.uuid4().hex[:12]}"
    db = SupportDatabase(pg_url, schema=schema, max_size=2)
    await db.open()
    try:
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        yield desk
        async with db.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await db.close()


@pytest.fixture
async def as_configured(
    pg_url: str, encoder: MiniLMEncoder, builtin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SupportAgent]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path_factory.mktemp("builtin-wording"))
    async with open_support_desk(settings, builtin_dir, encoder=encoder) as desk:
        yield desk


def _seen(result: TurnResult) -> dict[str, object]:
    return {
        "route": result.route,
        "answer": result.answer,
        "stop_reason": result.stop_reason,
        "fallback": result.fallback,
    }


async def _differences(desk: SupportAgent, layer: str) -> list[str]:
    run = uuid.uuid4().hex[:8]
    differences: list[str] = []
    for session, turns in _recorded(layer).items():
        for turn in turns:
            got = _seen(await desk.ask(str(turn["message"]), session_id=f"{run}-{session}"))
            expected = {key: turn[key] for key in got}
            if got != expected:
                differences.append(f"{turn['group']} {turn['message']!r}: recorded {expected}, now {got}")
    return differences


def test_the_recording_holds_every_message() -> None:
    rows = [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]
    for layer in ("fitted", "examples"):
        groups = [row["group"] for row in rows if row["layer"] == layer]
        assert groups.count("contract") == 11 and groups.count("labelled") == 204 and groups.count("conversation") > 19
        assert {row["stop_reason"] for row in rows if row["group"] == "contract"} == {"success"}


async def test_the_desk_as_configured_answers_as_recorded(as_configured: SupportAgent, layer_kind: str) -> None:
    differences = await _differences(as_configured, layer_kind)
    assert not differences, "\n".join(differences)


async def test_the_desk_on_one_database_answers_as_recorded(on_one_database: SupportAgent, layer_kind: str) -> None:
    differences = await _differences(on_one_database, layer_kind)
    assert not differences, "\n".join(differences)
