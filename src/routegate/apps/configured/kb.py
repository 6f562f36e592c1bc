"""The knowledge base of a configured desk, in PostgreSQL: incremental ingest and hybrid search.

:func:`ingest` reads the configured documents (:mod:`.documents`: the regular files of the desk directory's docs
paths, no symbolic link followed, each size-checked before it is read), compares each file's sha256 (and the encoder's
model id) with what was ingested before, and re-chunks and re-embeds only the files that changed; files that
are gone are removed with their chunks. Then the score cut-off is calibrated on the chunks (:mod:`.kb_calibration`).
One transaction: a failed ingest leaves the previous knowledge base.

Each chunk has its embedding (pgvector, HNSW index) and its words (``fts``: a ``tsvector`` generated from heading and
content in the configured text-search ``language``, GIN index). :class:`KnowledgeBase` searches both in one
statement — the nearest chunks by meaning, the chunks holding any of the question's words ranked by ``ts_rank`` —
fuses the two rankings (:mod:`.kb_fusion`) and keeps the chunks the calibrated gate accepts. The question reaches
PostgreSQL only as a bound parameter of ``websearch_to_tsquery``, which accepts any text.

A desk made before hybrid search gains the ``fts`` column and its index on start (PostgreSQL computes it from the
stored text: nothing is embedded again), and its calibration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import numpy as np
    from psycopg import sql

from routegate.apps.configured.config import DeskConfig, DeskConfigError, desk_path
from routegate.apps.configured.documents import chunks_of, read_documents
from routegate.apps.configured.kb_calibration import (
    DEFAULT_MIN_SCORE,
    OFF_TOPIC,
    Calibration,
    calibrate,
    headings_by_source,
)
from routegate.apps.configured.kb_fusion import Candidate, answers, fuse
from routegate.apps.support.db import AsyncConn, SupportDatabase, embedding_type
from routegate.apps.support.vector_tool import MAX_TOP_K, nearest, vector_literal
from routegate.embed import Encoder, encode_async


@dataclass(frozen=True, slots=True)
class IngestReport:
    added: tuple[str, ...]
    updated: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: tuple[str, ...]
    chunks: int  # chunks embedded by this run
    skipped: tuple[str, ...] = ()
    """Files of the docs folders passed by and not read (``docs/x.md (a symbolic link: ...)``)."""
    calibration: Calibration | None = None
    """The cut-off this run calibrated (``None``: nothing changed, the stored one holds)."""

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged; {self.chunks} chunks embedded"
        )


@dataclass(frozen=True, slots=True)
class Passage:
    source: str
    heading: str
    content: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "title": self.heading, "content": self.content, "score": round(self.score, 4)}


async def ensure_tables(db: SupportDatabase, dim: int, language: str = "english") -> None:
    """The chunk, file and calibration tables of the state schema; the chunks rebuilt (emptied) when the encoder's
    dimension changed, their ``fts`` column added (an existing desk) or remade (``language`` changed) in place."""
    async with db.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (language,))
        if await cur.fetchone() is None:
            cur = await conn.execute(
                "SELECT string_agg(cfgname::text, ', ' ORDER BY cfgname) AS names FROM pg_ts_config"
            )
            known = (await cur.fetchone() or {}).get("names")
            raise DeskConfigError(
                f"[knowledge] language = {language!r} is not a text-search configuration of this PostgreSQL; "
                f"use one of: {known}"
            )
        found = await embedding_type(conn, db.schema, "kb_chunks")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS kb_calibration (one boolean PRIMARY KEY DEFAULT true CHECK (one), "
            "model_id text NOT NULL, min_score double precision NOT NULL, floor double precision NOT NULL, "
            "details jsonb NOT NULL)"
        )
        if found is not None and found != f"vector({dim})":
            await conn.execute("DROP TABLE kb_chunks")
            await conn.execute("DELETE FROM kb_files")
            await conn.execute("DELETE FROM kb_calibration")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS kb_files (source text PRIMARY KEY, digest text NOT NULL, model_id text NOT NULL)"
        )
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS kb_chunks (id bigserial PRIMARY KEY, source text NOT NULL, chunk integer "
                "NOT NULL, heading text NOT NULL, content text NOT NULL, embedding vector({}) NOT NULL)"
            ).format(sql.Literal(dim))
        )
        await _ensure_words(conn, db.schema, language)
        await conn.execute("CREATE INDEX IF NOT EXISTS kb_chunks_source ON kb_chunks (source)")
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS kb_chunks_embedding ON kb_chunks USING hnsw (embedding vector_cosine_ops)"
        )
        await conn.execute("CREATE INDEX IF NOT EXISTS kb_chunks_fts ON kb_chunks USING gin (fts)")


async def _ensure_words(conn: AsyncConn, schema: str, language: str) -> None:
    """The ``fts`` column, generated from heading and content in ``language`` (recorded as the column's comment):
    added when missing, remade when the language changed. PostgreSQL fills it from the stored text."""
    cur = await conn.execute(
        "SELECT col_description(c.oid, a.attnum) AS language FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'kb_chunks' AND a.attname = 'fts' AND NOT a.attisdropped",
        (schema,),
    )
    row = await cur.fetchone()
    if row is not None and row["language"] == language:
        return
    if row is not None:
        await conn.execute("ALTER TABLE kb_chunks DROP COLUMN fts")  # its index goes with it
    await conn.execute(
        sql.SQL(
            "ALTER TABLE kb_chunks ADD COLUMN fts tsvector GENERATED ALWAYS AS "
            "(to_tsvector({}::regconfig, heading || ' ' || content)) STORED"
        ).format(sql.Literal(language))
    )
    await conn.execute(sql.SQL("COMMENT ON COLUMN kb_chunks.fts IS {}").format(sql.Literal(language)))


MAX_HEADINGS: Final = 8
"""Headings of one document the calibration asks with (its title and first sections)."""


async def _calibrate(conn: AsyncConn, encoder: Encoder) -> Calibration | None:
    """Calibrate the cut-off on the chunks as they are now and store it; ``None`` when there are no chunks."""
    cur = await conn.execute("SELECT source, heading, embedding::text AS embedding FROM kb_chunks ORDER BY id")
    rows = await cur.fetchall()
    if not rows:
        await conn.execute("DELETE FROM kb_calibration")
        return None
    sources = [str(r["source"]) for r in rows]
    vectors = np.asarray([json.loads(r["embedding"]) for r in rows], dtype=np.float32)
    found = headings_by_source([(source, str(r["heading"])) for source, r in zip(sources, rows, strict=True)])
    headings = {source: texts[:MAX_HEADINGS] for source, texts in found.items()}
    texts = [h for hs in headings.values() for h in hs]
    encoded = np.asarray(await encode_async(encoder, [*texts, *OFF_TOPIC]), dtype=np.float32)
    by_source: dict[str, Any] = {}
    at = 0
    for source, hs in headings.items():
        by_source[source] = encoded[at : at + len(hs)]
        at += len(hs)
    result = calibrate(sources, vectors, headings, by_source, encoded[len(texts) :])
    await conn.execute(
        "INSERT INTO kb_calibration (model_id, min_score, floor, details) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (one) DO UPDATE SET model_id = EXCLUDED.model_id, min_score = EXCLUDED.min_score, "
        "floor = EXCLUDED.floor, details = EXCLUDED.details",
        (encoder.model_id, result.min_score, result.floor, json.dumps(result.to_dict())),
    )
    return result


async def calibrated(db: SupportDatabase, encoder: Encoder) -> Calibration | None:
    """Calibrate when the knowledge base has chunks but no calibration from this encoder (a desk ingested before
    calibration existed, started without ingest); ``None`` when nothing was done."""
    async with db.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM kb_chunks) AS chunks, "
            "EXISTS (SELECT 1 FROM kb_calibration WHERE model_id = %s) AS done",
            (encoder.model_id,),
        )
        row = await cur.fetchone()
        if row is None or not row["chunks"] or row["done"]:
            return None
        return await _calibrate(conn, encoder)


async def ingest(config: DeskConfig, desk_dir: Path, db: SupportDatabase, encoder: Encoder) -> IngestReport:
    """Bring the knowledge base in line with the documents on disk (only what changed is embedded)."""
    await ensure_tables(db, encoder.dim, config.knowledge.language)
    paths = config.knowledge.paths
    found = read_documents([desk_path(desk_dir, p, f"knowledge.paths[{i}]") for i, p in enumerate(paths)])
    documents = found.documents
    async with db.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.desk.kb.' || %s))", (db.schema,))
        cur = await conn.execute("SELECT source, digest, model_id FROM kb_files")
        before = {str(r["source"]): (str(r["digest"]), str(r["model_id"])) for r in await cur.fetchall()}
        added: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        embedded = 0
        for document in documents:
            if before.get(document.source) == (document.digest, encoder.model_id):
                unchanged.append(document.source)
                continue
            (updated if document.source in before else added).append(document.source)
            chunks = chunks_of(document, config.knowledge.chunk_chars)
            texts = [f"{c.heading}. {c.content}" for c in chunks]
            vectors = list(await encode_async(encoder, texts)) if texts else []
            await conn.execute("DELETE FROM kb_chunks WHERE source = %s", (document.source,))
            async with conn.cursor() as write:
                await write.executemany(
                    "INSERT INTO kb_chunks (source, chunk, heading, content, embedding) VALUES (%s, %s, %s, %s, %s::vector)",
                    [
                        (c.source, c.index, c.heading, c.content, vector_literal(v))
                        for c, v in zip(chunks, vectors, strict=True)
                    ],
                )
            await conn.execute(
                "INSERT INTO kb_files (source, digest, model_id) VALUES (%s, %s, %s) "
                "ON CONFLICT (source) DO UPDATE SET digest = EXCLUDED.digest, model_id = EXCLUDED.model_id",
                (document.source, document.digest, encoder.model_id),
            )
            embedded += len(chunks)
        present = {d.source for d in documents}
        removed = sorted(set(before) - present)
        if removed:
            await conn.execute("DELETE FROM kb_chunks WHERE source = ANY(%s)", (removed,))
            await conn.execute("DELETE FROM kb_files WHERE source = ANY(%s)", (removed,))
        cur = await conn.execute("SELECT model_id FROM kb_calibration")
        stored = await cur.fetchone()
        calibration = None
        if added or updated or removed or stored is None or stored["model_id"] != encoder.model_id:
            calibration = await _calibrate(conn, encoder)
    return IngestReport(
        tuple(added), tuple(updated), tuple(removed), tuple(unchanged), embedded, found.skipped, calibration
    )


MEANING_CANDIDATES: Final = 20
"""How deep each ranking is read before fusion (at least; ``4 * top_k`` when more)."""
MAX_QUERY_CHARS: Final = 2000
_WORD = re.compile(r"\w+")

# Both rankings and what the gate needs, in one statement. The question's text is a bound parameter of
# websearch_to_tsquery (which never fails on its input): ``any`` (its words joined by ``or``) finds and ranks the
# chunks holding any word; ``all`` (its words) says which hold every word.
_HYBRID: Final = """
WITH q AS (
  SELECT websearch_to_tsquery(%(lang)s::regconfig, %(any)s) AS any_words,
         websearch_to_tsquery(%(lang)s::regconfig, %(all)s) AS all_words
), meaning AS (
  SELECT id, row_number() OVER (ORDER BY d, id) AS rank
  FROM (SELECT id, embedding <=> %(v)s::vector AS d FROM kb_chunks ORDER BY d LIMIT %(k)s) m
), words AS (
  SELECT id, row_number() OVER (ORDER BY r DESC, id) AS rank
  FROM (SELECT c.id, ts_rank(c.fts, q.any_words) AS r FROM kb_chunks c, q
        WHERE c.fts @@ q.any_words ORDER BY r DESC, c.id LIMIT %(k)s) w
)
SELECT c.id, c.source, c.heading, c.content, 1 - (c.embedding <=> %(v)s::vector) AS score,
       m.rank AS meaning_rank, w.rank AS words_rank, c.fts @@ q.all_words AS all_words,
       k.min_score AS calibrated, k.floor AS calibrated_floor
FROM meaning m FULL JOIN words w ON w.id = m.id
JOIN kb_chunks c ON c.id = coalesce(m.id, w.id)
CROSS JOIN q LEFT JOIN kb_calibration k ON true
"""


def query_words(text: str) -> tuple[str, str]:
    """The question as the two full-text queries read it: ``(any, all)`` — its words (letters and digits only: no
    quote, minus or ``or`` of the user's becomes an operator) joined by ``or``, and by spaces (every word)."""
    words = [w for w in _WORD.findall(text[:MAX_QUERY_CHARS]) if w.lower() != "or"]
    return " or ".join(words), " ".join(words)


class KnowledgeBase:
    """Search-only access to the chunks (the desk's VECTOR route). ``min_score``: the cut-off the desk set
    (``None``: the calibrated one); ``language``: the text-search configuration the chunks' words are indexed in."""

    def __init__(
        self, db: SupportDatabase, encoder: Encoder, *, min_score: float | None, language: str = "english"
    ) -> None:
        self._db = db
        self._encoder = encoder
        self.min_score = min_score
        self.language = language

    async def search(self, query: str, top_k: int = 3) -> list[Passage]:
        """The best ``top_k`` chunks by fused rank (meaning and words) that the cut-off accepts."""
        if not query.strip():
            return []
        top_k = max(1, min(top_k, MAX_TOP_K))
        any_words, all_words = query_words(query)
        params = {"lang": self.language, "any": any_words, "all": all_words}
        depth = max(MEANING_CANDIDATES, 4 * top_k)
        rows = await nearest(self._db, self._encoder, query, _HYBRID, depth, what="knowledge search", params=params)
        if not rows:
            return []
        calibrated = rows[0]["calibrated"]
        min_score = self.min_score if self.min_score is not None else calibrated
        min_score = DEFAULT_MIN_SCORE if min_score is None else float(min_score)
        # a cut-off the desk set is the one cut-off; a calibrated one comes with its floor for word-confirmed chunks
        floor = rows[0]["calibrated_floor"] if self.min_score is None else None
        floor = min_score if floor is None else min(float(floor), min_score)
        found = {int(r["id"]): r for r in rows}
        candidates = [
            Candidate(key, float(r["score"]), r["meaning_rank"], r["words_rank"], bool(r["all_words"]))
            for key, r in found.items()
        ]
        kept = answers(fuse(candidates), min_score=min_score, floor=floor)[:top_k]
        return [
            Passage(found[c.key]["source"], found[c.key]["heading"], found[c.key]["content"], c.similarity)
            for c in kept
        ]

    async def sources(self) -> Sequence[str]:
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT source FROM kb_files ORDER BY source")
            return [str(r["source"]) for r in await cur.fetchall()]
