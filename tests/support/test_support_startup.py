"""Start-up does only the work that is missing: the articles are embedded once, not on every start, and an
article whose title or content changes is embedded again. Checked in the database (the stored vectors and their
model id) and by counting the encoder's calls, not by a flag of the code under test."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.vector_tool import VectorTool
from routegate.embed import MiniLMEncoder
from routegate.embed.protocol import Vectors

pytestmark = pytest.mark.integration


class CountingEncoder:
    """The real encoder, counting the texts it is asked to embed."""

    def __init__(self, inner: MiniLMEncoder) -> None:
        self.inner = inner
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return self.inner.encode(texts)


async def _embedded(db: SupportDatabase) -> dict[int, str | None]:
    async with db.connection() as conn:
        cur = await conn.execute("SELECT id, model_id, embedding IS NOT NULL AS has FROM kb_articles ORDER BY id")
        return {row["id"]: row["model_id"] if row["has"] else None for row in await cur.fetchall()}


async def test_a_second_start_embeds_nothing(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    counting = CountingEncoder(encoder)
    assert await VectorTool(db, counting).index() == 3
    assert set((await _embedded(db)).values()) == {encoder.model_id}
    counting.texts.clear()
    await db.ensure_schema(embedding_dim=encoder.dim)  # the next start: schema check, then index
    assert await VectorTool(db, counting).index() == 0
    assert counting.texts == []  # the encoder was not asked for anything (a MiniLM is not even loaded)


async def test_a_changed_article_is_embedded_again_and_found(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    tool = VectorTool(db, encoder)
    await tool.index()
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE kb_articles SET title = 'Shipping Times', content = 'Parcels ship within two working days.' "
            "WHERE id = 1"
        )
        await conn.execute("UPDATE kb_articles SET id = id WHERE id = 2")  # no text change: the vector stays
    stored = await _embedded(db)
    assert stored[1] is None and stored[2] == encoder.model_id
    counting = CountingEncoder(encoder)
    assert await VectorTool(db, counting).index() == 1
    assert counting.texts == ["Shipping Times. Parcels ship within two working days."]
    assert (await tool.search("how long does shipping take?"))[0].title == "Shipping Times"


async def test_another_encoder_re_embeds_everything(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    await VectorTool(db, encoder).index()
    async with db.connection() as conn:
        await conn.execute("UPDATE kb_articles SET model_id = 'some-other-model' WHERE id = 3")
    counting = CountingEncoder(encoder)
    assert await VectorTool(db, counting).index() == 1
    assert set((await _embedded(db)).values()) == {encoder.model_id}
