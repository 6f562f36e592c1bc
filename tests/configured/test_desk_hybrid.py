"""Hybrid document retrieval on real PostgreSQL: full-text search beside pgvector, fused by rank, gated by a cut-off
calibrated from the desk's own documents — and a desk made before it gains the words column on start, nothing
embedded again."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.configured.kb_fusion import Candidate, answers, fuse
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk
from routegate.apps.support.vector_tool import KnowledgeBase, query_words
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import SHOP, desk_init

LOCKERS = """# Locker rules

Lockers close at 22:00. The QX7 override key for the locker banks is kept by the duty manager; property left
overnight is claimed with the Varnholt form.
"""


@pytest.fixture(scope="module")
def desk_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Path:
    """The shop example with one more page (lockers), as ``desk init`` writes it."""
    base = tmp_path_factory.mktemp("hybrid")
    docs = base / "docs"
    shutil.copytree(SHOP / "docs", docs)
    (docs / "lockers.md").write_text(LOCKERS, encoding="utf-8")
    shutil.copy(SHOP / "shop.sql", base / "shop.sql")
    assert desk_init(pg_url, base, str(base / "gym"), "--from-sql", str(base / "shop.sql"), "--kb", str(docs)) == 0
    return base / "gym"


@pytest.fixture
async def desk(desk_dir: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path) -> AsyncIterator[SupportAgent]:
    async with open_support_desk(Settings(database_url=pg_url, data_dir=tmp_path), desk_dir, encoder=encoder) as d:
        yield d


async def _calibration(desk: SupportAgent) -> tuple[float, float]:
    async with desk.db.connection() as conn:
        row = await (await conn.execute("SELECT min_score, floor FROM kb_calibration")).fetchone()
    assert row is not None, "ingest calibrates the cut-off"
    return float(row["min_score"]), float(row["floor"])


async def _vector_only(desk: SupportAgent, question: str, min_score: float) -> list[str]:
    """What the knowledge base found before hybrid search: the nearest chunks by meaning, under one cut-off."""
    async with desk.db.connection() as conn:
        vector = "[" + ",".join(f"{x:.7g}" for x in desk.encoder.encode([question])[0]) + "]"
        rows = await (
            await conn.execute(
                "SELECT source, 1 - (embedding <=> %s::vector) AS score FROM kb_chunks ORDER BY 2 DESC LIMIT 3",
                (vector,),
            )
        ).fetchall()
    return [r["source"] for r in rows if r["score"] >= min_score]


async def test_a_question_whose_words_only_full_text_search_matches_is_found(desk: SupportAgent) -> None:
    min_score, _ = await _calibration(desk)
    passages = await desk.kb.search("Varnholt form", top_k=3)
    assert passages and passages[0].source == "docs/lockers.md"
    assert passages[0].score < min_score  # meaning alone would have refused it: the words found it
    assert await _vector_only(desk, "Varnholt form", min_score) == []


async def test_a_question_only_the_vector_matches_is_found(desk: SupportAgent) -> None:
    question = "can I use Apple Pay"
    any_words, _ = query_words(question)
    async with desk.db.connection() as conn:
        matched = await (
            await conn.execute(
                "SELECT count(*) AS n FROM kb_chunks WHERE fts @@ websearch_to_tsquery('english', %s)",
                (any_words,),
            )
        ).fetchone()
    assert matched is not None and matched["n"] == 0  # no word of the question is in any page
    passages = await desk.kb.search(question, top_k=3)
    assert passages and passages[0].source == "docs/payments.txt"


async def test_the_calibrated_cut_off_refuses_an_off_topic_question(desk: SupportAgent) -> None:
    min_score, _ = await _calibration(desk)
    assert min_score != 0.35  # calibrated, not the old constant
    for question in ("who painted the Mona Lisa", "how far is the moon from the earth"):
        assert await desk.kb.search(question, top_k=3) == []


def test_fusion_puts_what_both_rankings_found_above_what_one_put_first() -> None:
    both = Candidate(1, similarity=0.30, meaning_rank=2, words_rank=2)
    meaning_first = Candidate(2, similarity=0.50, meaning_rank=1, words_rank=None)
    words_first = Candidate(3, similarity=0.10, meaning_rank=None, words_rank=1)
    tie = Candidate(4, similarity=0.20, meaning_rank=None, words_rank=1)
    assert [c.key for c in fuse([meaning_first, words_first, both, tie])] == [1, 2, 4, 3]
    # the gate: meaning alone at min_score; every word of the question in the chunk from the floor
    kept = answers(
        [
            Candidate(5, 0.40, 1, None),
            Candidate(6, 0.20, 3, 2, all_words=True),
            Candidate(7, 0.20, 2, 1),
            Candidate(8, 0.05, 5, 1, all_words=True),
        ],
        min_score=0.35,
        floor=0.15,
    )
    assert [c.key for c in kept] == [5, 6]


async def test_an_existing_desk_gains_the_words_column_on_start_without_embedding_again(
    desk_dir: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path
) -> None:
    settings_ = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings_, desk_dir, encoder=encoder) as desk, desk.db.connection() as conn:
        # the tables as a desk made before hybrid search had them
        await conn.execute("DROP INDEX IF EXISTS kb_chunks_fts")
        await conn.execute("ALTER TABLE kb_chunks DROP COLUMN fts")
        await conn.execute("DROP TABLE kb_calibration")
        before = await (await conn.execute("SELECT id, embedding::text AS e FROM kb_chunks ORDER BY id")).fetchall()
    async with open_support_desk(settings_, desk_dir, encoder=encoder) as desk:
        assert desk.ingested is not None and desk.ingested.chunks == 0  # nothing embedded again
        async with desk.db.connection() as conn:
            after = await (await conn.execute("SELECT id, embedding::text AS e FROM kb_chunks ORDER BY id")).fetchall()
            indexes = await (
                await conn.execute(
                    "SELECT indexdef FROM pg_indexes WHERE indexname = 'kb_chunks_fts' AND schemaname = %s",
                    (desk.db.schema,),
                )
            ).fetchall()
            words = await (await conn.execute("SELECT count(*) AS n FROM kb_chunks WHERE fts IS NOT NULL")).fetchone()
        assert after == before and before
        assert len(indexes) == 1 and "gin" in indexes[0]["indexdef"].lower()
        assert words is not None and words["n"] == len(before)
        await _calibration(desk)
        passages = await desk.kb.search("Varnholt form", top_k=3)
        assert passages and passages[0].source == "docs/lockers.md"


async def test_another_language_remakes_the_words_column_and_a_wrong_one_is_named(
    desk: SupportAgent, encoder: MiniLMEncoder
) -> None:
    from routegate.apps.configured.config import DeskConfigError
    from routegate.apps.configured.kb import ensure_tables

    await ensure_tables(desk.db, encoder.dim, "simple")
    simple = KnowledgeBase(desk.db, encoder, min_score=None, language="simple")
    assert (await simple.search("Varnholt form"))[0].source == "docs/lockers.md"
    async with desk.db.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT col_description('kb_chunks'::regclass, attnum) AS c FROM pg_attribute "
                "WHERE attrelid = 'kb_chunks'::regclass AND attname = 'fts'"
            )
        ).fetchone()
    assert row is not None and row["c"] == "simple"
    with pytest.raises(DeskConfigError, match=r"klingon.*use one of: .*english"):
        await ensure_tables(desk.db, encoder.dim, "klingon")
    await ensure_tables(desk.db, encoder.dim, "english")


HOSTILE = [
    "'); DROP TABLE kb_chunks; --",
    '"unclosed phrase',
    "-(!&|<->:*",
    "a" * 5000,
    "word\x00with NUL",
    "or or or -or",
    "⁂ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ‮reversed",
    "!!!",
]


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_questions_reach_the_search_as_data(desk: SupportAgent, text: str) -> None:
    async with desk.db.connection() as conn:
        count = await (await conn.execute("SELECT count(*) AS n FROM kb_chunks")).fetchone()
    assert isinstance(await desk.kb.search(text, top_k=3), list)
    async with desk.db.connection() as conn:
        assert await (await conn.execute("SELECT count(*) AS n FROM kb_chunks")).fetchone() == count


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_any_text_makes_a_valid_full_text_query(pg_url: str, text: str) -> None:
    """What the search sends websearch_to_tsquery — built from any text — parses, and is only ever a parameter; the
    raw text too (but NUL, which PostgreSQL text cannot hold and the search never sends)."""
    any_words, all_words = query_words(text)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "SELECT websearch_to_tsquery('english', %s), websearch_to_tsquery('english', %s), "
            "to_tsvector('english', 'a page') @@ websearch_to_tsquery('english', %s), "
            "websearch_to_tsquery('simple', %s)",
            (any_words, all_words, any_words, text.replace("\x00", "")),
        )


def test_the_cut_off_is_the_highest_off_topic_score_held_under_the_documents_own() -> None:
    import numpy as np

    from routegate.apps.configured.kb_calibration import LOWEST, calibrate

    def at(cosine: float) -> list[float]:  # a unit vector at this cosine from (1, 0, 0)
        return [cosine, float(np.sqrt(1 - cosine**2)), 0.0]

    chunks = np.asarray([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    headings = {"a.md": ["A"], "b.md": ["B"]}
    own = {"a.md": np.asarray([at(0.9)]), "b.md": np.asarray([[0.0, 0.2, 0.98]])}
    off = np.asarray([at(0.30), at(0.10), at(0.20)])
    calibration = calibrate(["a.md", "b.md"], chunks, headings, own, off)
    assert round(calibration.min_score, 3) == 0.30 and round(calibration.floor, 3) == 0.20  # highest; median
    assert round(calibration.own_low, 2) == 0.90 and calibration.other_high is not None
    # a document reached by its own heading at 0.25 only holds the cut-off there
    low = {**own, "a.md": np.asarray([at(0.25)])}
    assert round(calibrate(["a.md", "b.md"], chunks, headings, low, off).min_score, 3) == 0.25
    # unrelated questions that score nothing leave the lowest cut-off, not zero
    assert calibrate(["a.md", "b.md"], chunks, headings, own, np.asarray([[0.0, 1.0, 0.0]])).min_score == LOWEST
