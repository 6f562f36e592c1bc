"""Start-up does only the work that is missing: the desk's documents (the built-in desk's three help articles) are
embedded once, not on every start; a changed document, or another encoder, is embedded again. Checked in the
database (the stored files and their model id) and by counting the encoder's calls, not by a flag of the code
under test."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.configured.kb_calibration import OFF_TOPIC
from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from routegate.embed.protocol import Vectors

pytestmark = pytest.mark.integration


class CountingEncoder:
    """The real encoder, counting the texts it is asked to embed (under another model id when told)."""

    def __init__(self, inner: MiniLMEncoder, model_id: str | None = None) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self._model_id = model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self._model_id or self.inner.model_id

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return self.inner.encode(texts)


async def _start(
    db: SupportDatabase, encoder: CountingEncoder, semantic: ExampleEmbeddingLayer, desk_dir: Path | None = None
) -> SupportAgent:
    config = None if desk_dir is None else builtin_config()
    desk = SupportAgent(config, desk_dir, db=db, encoder=encoder, semantic=semantic)
    await desk.start()
    return desk


async def _files(db: SupportDatabase) -> dict[str, str]:
    async with db.connection() as conn:
        cur = await conn.execute("SELECT source, model_id FROM kb_files ORDER BY source")
        return {row["source"]: row["model_id"] for row in await cur.fetchall()}


async def test_a_second_start_embeds_nothing(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    counting = CountingEncoder(encoder)
    first = await _start(db, counting, semantic)
    assert first.ingested is not None and len(first.ingested.added) == 3
    assert set((await _files(db)).values()) == {encoder.model_id}
    counting.texts.clear()
    again = await _start(db, counting, semantic)  # the next start: schema check, then the documents' hashes
    assert again.ingested is not None and len(again.ingested.unchanged) == 3 and again.ingested.chunks == 0
    assert counting.texts == []  # the encoder was not asked for anything (a MiniLM is not even loaded)


async def test_a_changed_article_is_embedded_again_and_found(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, tmp_path: Path
) -> None:
    desk_dir = Path(shutil.copytree(builtin_desk_dir(), tmp_path / "support"))
    await _start(db, CountingEncoder(encoder), semantic, desk_dir)
    (desk_dir / "docs" / "password-reset.md").write_text(
        "# Shipping Times\n\nParcels ship within two working days.\n", encoding="utf-8"
    )
    counting = CountingEncoder(encoder)
    desk = await _start(db, counting, semantic, desk_dir)
    assert desk.ingested is not None and desk.ingested.updated == ("docs/password-reset.md",)
    # the changed chunk is embedded again, and nothing else of the documents; the calibration of the cut-off then
    # encodes the documents' headings and its off-topic probes (it re-runs whenever a document changed)
    assert counting.texts[0] == "Shipping Times. Parcels ship within two working days."
    rest = counting.texts[1:]
    assert rest[-len(OFF_TOPIC) :] == list(OFF_TOPIC)
    assert not [text for text in rest[: -len(OFF_TOPIC)] if ". " in text]  # headings, not chunks
    assert (await desk.kb.search("how long does shipping take?"))[0].heading == "Shipping Times"


async def test_another_encoder_re_embeds_everything(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    await _start(db, CountingEncoder(encoder), semantic)
    other = CountingEncoder(encoder, model_id="some-other-model")
    desk = await _start(db, other, semantic)
    assert desk.ingested is not None and len(desk.ingested.updated) == 3
    assert set((await _files(db)).values()) == {"some-other-model"}
