"""Two rankings of the knowledge chunks made one: by meaning (pgvector) and by words (PostgreSQL full-text search).

Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a chunk's fused score is the sum, over the
rankings it appears in, of ``1 / (RRF_K + rank)``. Ranks only: a cosine similarity and a ``ts_rank`` are on scales
that cannot be compared (``ts_rank`` grows with repeated words and has no upper bound), so adding or weighting the
scores would need a per-desk tuning that ranks do not. ``RRF_K = 60`` is the constant of the paper, which damps the
weight of the very first ranks so that a chunk both lists agree on beats one that only one list puts first.

Which fused chunks are answers is :func:`answers`: the calibrated gate (:mod:`.kb_calibration`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

RRF_K: Final = 60


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk either ranking found: its rank in each (``None``: not in that list), its cosine similarity to the
    question, and whether it holds every word of the question (``all_words``)."""

    key: int
    similarity: float
    meaning_rank: int | None
    words_rank: int | None
    all_words: bool = False

    @property
    def fused(self) -> float:
        return sum(1.0 / (RRF_K + rank) for rank in (self.meaning_rank, self.words_rank) if rank is not None)


def fuse(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Best first: by fused score, then similarity, then key (a stable order for equal scores)."""
    return sorted(candidates, key=lambda c: (-c.fused, -c.similarity, c.key))


def answers(fused: Sequence[Candidate], *, min_score: float, floor: float) -> list[Candidate]:
    """The fused chunks that answer: similarity at least ``min_score`` (meaning alone), or every word of the
    question in the chunk and similarity at least ``floor`` (the words confirm what the meaning suggests)."""
    return [c for c in fused if c.similarity >= min_score or (c.all_words and c.similarity >= floor)]
