"""The knowledge base of a desk, in PostgreSQL: incremental ingest and the cut-off's calibration (the search is
the desk's vector tool, :class:`~routegate.apps.support.vector_tool.KnowledgeBase`, by meaning and by words).

:func:`ingest` reads the configured documents (:mod:`.documents`: the regular files of the desk directory's docs
paths, no symbolic link followed, each size-checked before it is read), compares each file's sha256 (and the encoder's
model id) with what was ingested before, and re-chunks and re-embeds only the files that changed; files that
are gone are removed with their chunks. Then the score cut-off is calibrated on the chunks (:mod:`.kb_calibration`).
One transaction: a failed ingest leaves the previous knowledge base.

Each chunk has its embedding (pgvector, HNSW index) and its words (``fts``: a ``tsvector`` generated from heading and
content in the configured text-search ``language``, GIN index). A desk made before hybrid search gains the ``fts``
column and its index on start (PostgreSQL computes it from the stored text: nothing is embedded again), and its
calibration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import numpy as np
    from psycopg import sql

from routegate.apps.configured.config import DeskConfig, DeskConfigError, desk_path
from routegate.apps.configured.documents import chunks_of, read_documents
from routegate.apps.configured.kb_calibration import OFF_TOPIC, Calibration, calibrate, headings_by_source
from routegate.apps.support.db import AsyncConn, SupportDatabase, embedding_type
from routegate.apps.support.vector_tool import vector_literal
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


async def ensure_tables(db: SupportDatabase, dim: int, language: str = "english") -> None:
    """The chunk, file and calibration tables of the state schema; the chunks rebuilt (emptied) when the encoder's
    dimension changed, their ``fts`` column added (an existing desk) or remade (``language`` changed) in place."""
    async with db.connection() as conn, conn.transaction():
        # two processes starting the same desk at once (two `ask --desk`) would race on the CREATE/ALTER below
        # (a duplicate catalog row): one at a time, the second finds everything there
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.desk.kb-tables.' || %s))", (db.schema,))
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
