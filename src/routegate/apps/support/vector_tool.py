"""The vector tool: semantic search over the desk's knowledge base in pgvector (:class:`KnowledgeBase`).

``query`` + ``top_k`` (default 3) → ``documents`` [{content, score}] (plus ``source`` and ``title``): the chunks of
the desk's documents (``[knowledge] paths``: the built-in desk's three help articles), embedded when they are
ingested (:func:`routegate.apps.configured.kb.ingest`, at start or ``routegate kb ingest``) and stored in
``kb_chunks`` (cosine distance). Chunks scoring under ``min_score`` are dropped, so an irrelevant query returns an
empty list — the graph's signal to fall back. Search only: nothing is uploaded or re-embedded per query.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, LiteralString

from routegate._extras import needs

with needs("desk"):
    import numpy as np
    import psycopg
    from pgvector import Vector
    from pgvector.psycopg.vector import VectorBinaryDumper

from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.embed import Encoder, encode_async

logger = logging.getLogger(__name__)

MAX_TOP_K: Final = 10


@dataclass(frozen=True, slots=True)
class Passage:
    source: str
    heading: str
    content: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "title": self.heading, "content": self.content, "score": round(self.score, 4)}


def vector_literal(vector: Sequence[float] | np.ndarray[Any, Any]) -> str:
    """pgvector's text form ``[x,y,...]``, each number to 7 significant digits (sent as a parameter and cast with
    ``::vector``). One ``%`` formatting of all the numbers at once: a number at a time (``f"{x:.7g}"``) was
    0.2 ms of a 384-number vector, the largest single item of a knowledge-base turn outside the encoder."""
    values = vector.tolist() if isinstance(vector, np.ndarray) else [float(x) for x in vector]
    return _literal_format(len(values)) % tuple(values)


@lru_cache(maxsize=8)
def _literal_format(n: int) -> str:
    return "[" + ",".join(["%.7g"] * n) + "]"


async def nearest(
    db: SupportDatabase,
    encoder: Encoder,
    query: str,
    statement: LiteralString,
    top_k: int,
    *,
    what: str,
    tenant: str = ANONYMOUS,
) -> list[dict[str, Any]]:
    """The rows of ``statement``, a similarity search ordered by the distance to the query's vector (``%(v)s``),
    ``%(k)s`` rows at most. :class:`ToolError` ``encoder_error`` when the query cannot be embedded,
    ``database_error`` (naming ``what``) when the search fails. The connection is taken in ``tenant``'s turn."""
    # off the event loop (other turns keep running), in a shared pass when the encoder batches
    try:
        vector = Vector(np.asarray((await encode_async(encoder, [query]))[0]))
    except Exception as exc:  # the encoder failed (its runtime, its model): the search cannot run
        logger.warning("the encoder failed: %s", type(exc).__name__, exc_info=True)
        raise ToolError("encoder_error", f"the query could not be embedded ({type(exc).__name__})") from exc
    try:
        async with db.connection(tenant) as conn:
            cur = conn.cursor()
            # the vector goes in pgvector's binary form (its type left to the statement's ``::vector``: the
            # extension's type has no fixed OID), not as text: formatting 384 numbers cost 0.1-0.2 ms per search
            cur.adapters.register_dumper(Vector, VectorBinaryDumper)
            await cur.execute(statement, {"v": vector, "k": top_k})
            return list(await cur.fetchall())
    except psycopg.Error as exc:
        raise ToolError("database_error", f"{what} failed: {str(exc).splitlines()[0]}") from exc


_NEAREST_CHUNKS: Final = (
    "SELECT source, heading, content, 1 - (embedding <=> %(v)s::vector) AS score FROM kb_chunks "
    "ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
)


class KnowledgeBase:
    """Search-only access to the chunks (the desk's VECTOR route)."""

    def __init__(self, db: SupportDatabase, encoder: Encoder, *, min_score: float) -> None:
        self._db = db
        self._encoder = encoder
        self.min_score = min_score

    async def search(self, query: str, top_k: int = 3, *, tenant: str = ANONYMOUS) -> list[Passage]:
        """The ``top_k`` chunks nearest ``query`` scoring at least ``min_score``, best first (for ``tenant``)."""
        if not query.strip():
            return []
        top_k = max(1, min(top_k, MAX_TOP_K))
        statement = _NEAREST_CHUNKS
        rows = await nearest(self._db, self._encoder, query, statement, top_k, what="knowledge search", tenant=tenant)
        passages = [Passage(r["source"], r["heading"], r["content"], float(r["score"])) for r in rows]
        return [p for p in passages if p.score >= self.min_score]

    async def sources(self) -> Sequence[str]:
        async with self._db.connection() as conn:
            cur = await conn.execute("SELECT source FROM kb_files ORDER BY source")
            return [str(r["source"]) for r in await cur.fetchall()]
