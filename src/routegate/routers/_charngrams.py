"""Character n-gram TF-IDF features, reimplemented for inference so a saved router loads without pickle.

Training uses scikit-learn's ``TfidfVectorizer`` with :func:`char_wb_ngrams` as its analyzer; inference uses
:class:`CharNgrams` (the vocabulary and idf weights as plain arrays). Same analyzer, same weighting
(sublinear tf x idf, L2-normalised), so both give the same vectors (a test pins it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from routegate._extras import needs

with needs("embed"):
    import numpy as np
    import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def char_wb_ngrams(text: str, lo: int = 2, hi: int = 4) -> list[str]:
    """Lower-cased character n-grams inside word boundaries (each word padded with one space each side)."""
    grams: list[str] = []
    for word in text.lower().split():
        padded = f" {word} "
        size = len(padded)
        for n in range(lo, hi + 1):
            if n > size:
                break
            grams.extend(padded[i : i + n] for i in range(size - n + 1))
    return grams


@dataclass(frozen=True, slots=True)
class CharNgrams:
    """A fitted char n-gram TF-IDF vocabulary: n-gram → column, with its idf weight."""

    vocabulary: dict[str, int]
    idf: F32
    lo: int = 2
    hi: int = 4

    @classmethod
    def fit(
        cls, texts: Sequence[str], *, lo: int = 2, hi: int = 4, max_features: int = 30000, min_df: int = 2
    ) -> tuple[CharNgrams, Any]:
        """Fit on ``texts``; returns the vocabulary and the training matrix (scipy CSR)."""
        with needs("embed"):
            from sklearn.feature_extraction.text import TfidfVectorizer

        min_df = min_df if len(texts) >= 50 else 1
        vectorizer = TfidfVectorizer(
            analyzer=partial(char_wb_ngrams, lo=lo, hi=hi),
            sublinear_tf=True,
            min_df=min_df,
            max_features=max_features,
            dtype=np.float32,
        )
        matrix = vectorizer.fit_transform(list(texts))
        vocabulary = {str(k): int(v) for k, v in vectorizer.vocabulary_.items()}
        return cls(vocabulary, np.asarray(vectorizer.idf_, dtype=np.float32), lo, hi), matrix

    @property
    def size(self) -> int:
        return len(self.vocabulary)

    def vector(self, text: str) -> tuple[npt.NDArray[np.int64], F32]:
        """Sparse TF-IDF row of ``text``: (column indices, L2-normalised weights)."""
        counts = Counter(g for g in char_wb_ngrams(text, self.lo, self.hi) if g in self.vocabulary)
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        cols = np.fromiter((self.vocabulary[g] for g in counts), dtype=np.int64, count=len(counts))
        tf = np.fromiter((1.0 + math.log(c) for c in counts.values()), dtype=np.float32, count=len(counts))
        weights = tf * self.idf[cols]
        norm = float(np.linalg.norm(weights))
        return cols, (weights / norm if norm > 0 else weights).astype(np.float32)

    def logits(self, texts: Sequence[str], coef: F32, intercept: F32) -> F32:
        """``X @ coef.T + intercept`` for the TF-IDF rows of ``texts`` without building a sparse matrix."""
        out = np.tile(intercept, (len(texts), 1)).astype(np.float32)
        for row, text in enumerate(texts):
            cols, weights = self.vector(text)
            if len(cols):
                out[row] += coef[:, cols] @ weights
        return out

    def ordered_vocabulary(self) -> list[str]:
        """N-grams in column order (for saving)."""
        ordered = [""] * len(self.vocabulary)
        for gram, col in self.vocabulary.items():
            ordered[col] = gram
        return ordered
