"""The vector tool: semantic search over the help articles in pgvector.

``query`` + ``top_k`` (default 3) → ``documents`` [{content, score}] (plus ``title``). The three articles are
embedded once at start-up (:meth:`VectorTool.index`) with the injected encoder and stored in ``kb_articles``
(HNSW index, cosine distance). Documents scoring under ``min_score`` are dropped, so an irrelevant query returns
an empty list — the graph's signal to fall back. Search only: nothing is uploaded or re-embedded per query.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
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
from routegate.embed import Encoder, encode_async
from routegate.errors import ConfigurationError

logger = logging.getLogger(__name__)

# Cosine similarity (all-MiniLM-L6-v2) under which an article is not an answer. Calibrated on the labelled
# set: the help questions score >= 0.45 with their article, off-topic and unrelated how-to questions <= 0.36 (docs/support.md).
DEFAULT_MIN_SCORE: Final = 0.40
MAX_TOP_K: Final = 10


@dataclass(frozen=True, slots=True)
class Document:
    title: str
    content: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "content": self.content, "score": round(self.score, 4)}


def vector_literal(vector: Sequence[float] | np.ndarray[Any, Any]) -> str:
    """pgvector's text form ``[x,y,...]``, each number to 7 significant digits (sent as a parameter and cast with
    ``::vector``). One ``%`` formatting of all the numbers at once: a number at a time (``f"{x:.7g}"``) was
    0.2 ms of a 384-number vector, the largest single item of a knowledge-base turn outside the encoder."""
    values = vector.tolist() if isinstance(vector, np.ndarray) else [float(x) for x in vector]
    return _literal_format(len(values)) % tuple(values)


@lru_cache(maxsize=8)
def _literal_format(n: int) -> str:
    return "[" + ",".join(["%.7g"] * n) + "]"


_NEAREST_ARTICLES: Final = (
    "SELECT title, content, 1 - (embedding <=> %(v)s::vector) AS score FROM kb_articles "
    "WHERE embedding IS NOT NULL ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
)


async def nearest(
    db: SupportDatabase,
    encoder: Encoder,
    query: str,
    statement: LiteralString,
    top_k: int,
    *,
    what: str,
    params: Mapping[str, object] | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``statement``, a similarity search ordered by the distance to the query's vector (``%(v)s``),
    ``%(k)s`` rows at most; ``params``: the statement's other parameters (bound, never formatted in).
    :class:`ToolError` ``encoder_error`` when the query cannot be embedded, ``database_error`` (naming ``what``)
    when the search fails."""
    # off the event loop (other turns keep running), in a shared pass when the encoder batches
    try:
        vector = Vector(np.asarray((await encode_async(encoder, [query]))[0]))
    except Exception as exc:  # the encoder failed (its runtime, its model): the search cannot run
        logger.warning("the encoder failed: %s", type(exc).__name__, exc_info=True)
        raise ToolError("encoder_error", f"the query could not be embedded ({type(exc).__name__})") from exc
    try:
        async with db.connection() as conn:
            cur = conn.cursor()
            # the vector goes in pgvector's binary form (its type left to the statement's ``::vector``: the
            # extension's type has no fixed OID), not as text: formatting 384 numbers cost 0.1-0.2 ms per search
            cur.adapters.register_dumper(Vector, VectorBinaryDumper)
            await cur.execute(statement, {**(params or {}), "v": vector, "k": top_k})
            return list(await cur.fetchall())
    except psycopg.Error as exc:
        raise ToolError("database_error", f"{what} failed: {str(exc).splitlines()[0]}") from exc


class VectorTool:
    """Search-only access to the knowledge-base articles."""

    name = "vector"

    def __init__(self, db: SupportDatabase, encoder: Encoder, *, min_score: float = DEFAULT_MIN_SCORE) -> None:
        if not -1.0 <= min_score <= 1.0:
            raise ConfigurationError(f"min_score must be a cosine similarity in [-1, 1], got {min_score}")
        self._db = db
        self._encoder = encoder
        self.min_score = min_score

    async def index(self) -> int:
        """Embed the articles that have no vector from this encoder yet (start-up) and store the vectors. Returns
        the number of articles embedded: 0 on a start where nothing changed, so the encoder is not even loaded (an
        article whose title or content changes loses its vector, see :mod:`.db`, and is embedded again)."""
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT id, title, content FROM kb_articles"
                " WHERE embedding IS NULL OR model_id IS DISTINCT FROM %s ORDER BY id",
                (self._encoder.model_id,),
            )
            articles = await cur.fetchall()
            if not articles:
                return 0
            vectors = self._encoder.encode([f"{a['title']}. {a['content']}" for a in articles])
            async with conn.transaction(), conn.cursor() as write:
                await write.executemany(
                    "UPDATE kb_articles SET embedding = %s::vector, model_id = %s WHERE id = %s",
                    [
                        (vector_literal(v), self._encoder.model_id, a["id"])
                        for a, v in zip(articles, vectors, strict=True)
                    ],
                )
        return len(articles)

    async def search(self, query: str, top_k: int = 3) -> list[Document]:
        """Top ``top_k`` articles by cosine similarity, those under ``min_score`` left out."""
        if not isinstance(query, str) or not query.strip():
            return []
        if not 1 <= top_k <= MAX_TOP_K:
            raise ConfigurationError(f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
        rows = await nearest(self._db, self._encoder, query, _NEAREST_ARTICLES, top_k, what="vector search")
        documents = [Document(r["title"], r["content"], float(r["score"])) for r in rows]
        return [d for d in documents if d.score >= self.min_score]
