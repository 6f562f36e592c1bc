"""The knowledge base's score cut-off, calibrated from the desk's own documents (at ingest) instead of one constant.

A question's cosine similarity to the chunk that answers it depends on the encoder *and* on the documents: short
pages, long pages, pages that share a vocabulary all move it. So the cut-off is measured on this desk:

* **noise** — what text about nothing in these documents reaches: each of :data:`OFF_TOPIC` (small talk, weather,
  sport, cooking, code, ...) is compared with every chunk and keeps its best similarity; ``noise`` is the highest of
  those bests, ``typical`` their median;
* **own** — what a question about a document reaches: each document's title and section headings, compared with the
  chunks of the *same* document (its best); ``own_low`` is the lowest of those;
* **other** — the same headings compared with the chunks of the *other* documents (their best); ``other_high`` is
  the highest: how alike the desk's documents are (reported, so a desk author sees when two pages overlap).

``min_score`` (a chunk is an answer on its meaning alone) is ``noise`` — no unrelated probe would have been answered
— kept inside [:data:`LOWEST`, :data:`HIGHEST`] and never above ``own_low`` (every document stays reachable by its
own headings). ``floor`` is ``typical``: a chunk holding *every* word of the question (full-text search) is an answer
from there — the words confirm what meaning alone could not.

A desk whose documents are about one of the probes' subjects (a cooking desk) sees that probe match: its
``min_score`` is then held down by ``own_low`` only, and ``[knowledge] min_score`` sets the cut-off by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import numpy as np

DEFAULT_MIN_SCORE: Final = 0.35
"""The cut-off before a desk has been calibrated (no chunks yet): the fixed constant desks had before."""
LOWEST: Final = 0.15
HIGHEST: Final = 0.60
TYPICAL_QUANTILE: Final = 0.5

OFF_TOPIC: Final = (
    "hello there",
    "good morning, how are you",
    "thanks, that's all",
    "tell me a joke",
    "what is the weather like tomorrow",
    "will it snow this weekend",
    "who won the football match last night",
    "what is the score of the basketball game",
    "how do I bake sourdough bread",
    "give me a recipe for lasagna",
    "what is the capital of Australia",
    "how tall is Mount Everest",
    "what is 17 times 23",
    "solve this equation for x",
    "write a Python function that sorts a list",
    "why does my JavaScript code throw an error",
    "recommend a good science fiction novel",
    "what movies are playing tonight",
    "who is the president of France",
    "translate good night into Japanese",
    "what is the meaning of life",
    "how do plants make energy from sunlight",
    "what time is it in Tokyo",
    "play some relaxing music",
    "what is the price of Bitcoin today",
    "how many legs does a spider have",
    "explain quantum entanglement simply",
    "what should I name my cat",
    "how do I fix a flat bicycle tyre",
    "when did the Second World War end",
    "write a poem about the sea",
    "what are the symptoms of the flu",
)
"""Text about nothing a desk's documents say: how high unrelated questions score on this desk's chunks."""


@dataclass(frozen=True, slots=True)
class Calibration:
    min_score: float
    floor: float
    noise: float
    own_low: float
    other_high: float | None
    probes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_score": round(self.min_score, 4),
            "floor": round(self.floor, 4),
            "noise": round(self.noise, 4),
            "own_low": round(self.own_low, 4),
            "other_high": None if self.other_high is None else round(self.other_high, 4),
            "probes": self.probes,
        }


def headings_by_source(chunks: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Each document's distinct headings (its title first), from its chunks' ``(source, heading)``."""
    out: dict[str, list[str]] = {}
    for source, heading in chunks:
        seen = out.setdefault(source, [])
        if heading.strip() and heading not in seen:
            seen.append(heading)
    return out


def calibrate(
    sources: Sequence[str],
    chunk_vectors: np.ndarray[Any, Any],
    headings: Mapping[str, Sequence[str]],
    heading_vectors: Mapping[str, np.ndarray[Any, Any]],
    off_topic_vectors: np.ndarray[Any, Any],
) -> Calibration:
    """The cut-off of a knowledge base: ``sources[i]`` is the document of chunk ``chunk_vectors[i]``. Every vector is
    scaled to unit length first, so a dot product is the cosine similarity pgvector's ``<=>`` gives."""
    chunks = _unit(chunk_vectors)
    owner = np.asarray(sources)
    unrelated = (_unit(off_topic_vectors) @ chunks.T).max(axis=1)
    noise = float(unrelated.max())
    typical = float(np.quantile(unrelated, TYPICAL_QUANTILE))
    own: list[float] = []
    other: list[float] = []
    for source, texts in headings.items():
        if not texts:
            continue
        scores = _unit(heading_vectors[source]) @ chunks.T  # headings x chunks
        mine = owner == source
        own.extend(scores[:, mine].max(axis=1).tolist())
        if (~mine).any():
            other.extend(scores[:, ~mine].max(axis=1).tolist())
    own_low = min(own) if own else HIGHEST
    min_score = min(max(noise, LOWEST), HIGHEST, own_low)
    return Calibration(
        min_score=min_score,
        floor=min(typical, min_score),
        noise=noise,
        own_low=own_low,
        other_high=max(other) if other else None,
        probes=len(own) + len(OFF_TOPIC),
    )


def _unit(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)
