"""The vector tool: search over the desk's knowledge base in PostgreSQL, by meaning and by words
(:class:`KnowledgeBase`).

``query`` + ``top_k`` (default 3) → ``documents`` [{content, score}] (plus ``source`` and ``title``): the chunks of
the desk's documents (``[knowledge] paths``: the built-in desk's three help articles), embedded when they are
ingested (:func:`routegate.apps.configured.kb.ingest`, at start or ``routegate kb ingest``) and stored in
``kb_chunks`` with their embedding (pgvector, cosine distance) and their words (``fts``, a ``tsvector`` in the
configured text-search language). One statement reads the nearest chunks by meaning and the chunks holding any of
the question's words; the two rankings are fused (:mod:`routegate.apps.configured.kb_fusion`) and the chunks under
the cut-off dropped (the desk's ``min_score``, else the one calibrated at ingest:
:mod:`routegate.apps.configured.kb_calibration`), so an irrelevant query returns an empty list — the graph's signal
to fall back. The question reaches PostgreSQL only as a bound parameter of ``websearch_to_tsquery``. Search only:
nothing is uploaded or re-embedded per query.
"""

from __future__ import annotations

import logging
import re
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

from routegate.apps.configured.kb_calibration import DEFAULT_MIN_SCORE
from routegate.apps.configured.kb_fusion import Candidate, answers, fuse
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
    params: Mapping[str, object] | None = None,
    tenant: str = ANONYMOUS,
) -> list[dict[str, Any]]:
    """The rows of ``statement``, a similarity search ordered by the distance to the query's vector (``%(v)s``),
    ``%(k)s`` rows at most; ``params``: the statement's other parameters (bound, never formatted in).
    :class:`ToolError` ``encoder_error`` when the query cannot be embedded, ``database_error`` (naming ``what``)
    when the search fails. The connection is taken in ``tenant``'s turn."""
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
            await cur.execute(statement, {**(params or {}), "v": vector, "k": top_k})
            return list(await cur.fetchall())
    except psycopg.Error as exc:
        raise ToolError("database_error", f"{what} failed: {str(exc).splitlines()[0]}") from exc


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

    async def search(self, query: str, top_k: int = 3, *, tenant: str = ANONYMOUS) -> list[Passage]:
        """The best ``top_k`` chunks by fused rank (meaning and words) that the cut-off accepts (for ``tenant``)."""
        if not query.strip():
            return []
        top_k = max(1, min(top_k, MAX_TOP_K))
        any_words, all_words = query_words(query)
        params = {"lang": self.language, "any": any_words, "all": all_words}
        depth = max(MEANING_CANDIDATES, 4 * top_k)
        rows = await nearest(
            self._db, self._encoder, query, _HYBRID, depth, what="knowledge search", params=params, tenant=tenant
        )
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
