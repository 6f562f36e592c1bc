"""A cheap, deterministic encoder for tests and for wiring without a model.

:class:`HashingEncoder` hashes lower-cased words and character trigrams into a fixed number of signed buckets
(the "hashing trick") and L2-normalises the result. Texts that share words or spellings get close vectors, so
router logic can be exercised in unit tests in microseconds, with the same results on every machine and run
(the hash is CRC-32, not Python's salted ``hash``). It has no notion of meaning: paraphrases with no shared
words are far apart.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Final

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEncoder:
    """Deterministic bag-of-words + char-trigram hashing encoder (``dim`` buckets, unit-length rows)."""

    def __init__(self, dim: int = 256, *, char_ngrams: bool = True) -> None:
        if dim < 8:
            raise ConfigurationError(f"HashingEncoder dim must be >= 8, got {dim}")
        self.dim: Final = dim
        self.char_ngrams = char_ngrams

    def __repr__(self) -> str:
        return f"HashingEncoder(dim={self.dim}, char_ngrams={self.char_ngrams})"

    @property
    def model_id(self) -> str:
        return f"hashing-{self.dim}{'-c3' if self.char_ngrams else ''}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = _WORD.findall(text.lower())
        feats: list[tuple[str, float]] = [(f"w:{w}", 1.0) for w in words]
        if self.char_ngrams:
            for w in words:
                padded = f"<{w}>"
                feats.extend((f"c:{padded[i : i + 3]}", 0.5) for i in range(max(1, len(padded) - 2)))
        return feats or [("<empty>", 1.0)]

    def encode(self, texts: Sequence[str]) -> Vectors:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self._features(str(text)):
                h = zlib.crc32(feat.encode("utf-8", "surrogatepass"))
                sign = 1.0 if (h >> 31) & 1 else -1.0
                out[row, h % self.dim] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # all features cancelled out: fall back to a fixed unit vector
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out
