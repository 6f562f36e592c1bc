"""The knowledge base of a desk, in pgvector: incremental ingest (the search is the desk's vector tool,
:class:`~routegate.apps.support.vector_tool.KnowledgeBase`).

:func:`ingest` reads the configured documents (:mod:`.documents`: the regular files of the desk directory's docs
paths, no symbolic link followed, each size-checked before it is read), compares each file's sha256 (and the encoder's
model id) with what was ingested before, and re-chunks and re-embeds only the files that changed; files that
are gone are removed with their chunks. One transaction: a failed ingest leaves the previous knowledge base.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from routegate._extras import needs

with needs("desk"):
    from psycopg import sql

from routegate.apps.configured.config import DeskConfig, desk_path
from routegate.apps.configured.documents import chunks_of, read_documents
from routegate.apps.support.db import SupportDatabase, embedding_type
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

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged; {self.chunks} chunks embedded"
        )


async def ensure_tables(db: SupportDatabase, dim: int) -> None:
    """The chunk and file tables of the state schema; rebuilt (emptied) when the encoder's dimension changed."""
    async with db.connection() as conn, conn.transaction():
        found = await embedding_type(conn, db.schema, "kb_chunks")
        if found is not None and found != f"vector({dim})":
            await conn.execute("DROP TABLE kb_chunks")
            await conn.execute("DELETE FROM kb_files")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS kb_files (source text PRIMARY KEY, digest text NOT NULL, model_id text NOT NULL)"
        )
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS kb_chunks (id bigserial PRIMARY KEY, source text NOT NULL, chunk integer "
                "NOT NULL, heading text NOT NULL, content text NOT NULL, embedding vector({}) NOT NULL)"
            ).format(sql.Literal(dim))
        )
        await conn.execute("CREATE INDEX IF NOT EXISTS kb_chunks_source ON kb_chunks (source)")
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS kb_chunks_embedding ON kb_chunks USING hnsw (embedding vector_cosine_ops)"
        )


async def ingest(config: DeskConfig, desk_dir: Path, db: SupportDatabase, encoder: Encoder) -> IngestReport:
    """Bring the knowledge base in line with the documents on disk (only what changed is embedded)."""
    await ensure_tables(db, encoder.dim)
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
    return IngestReport(tuple(added), tuple(updated), tuple(removed), tuple(unchanged), embedded, found.skipped)
