"""The inference-time char n-gram TF-IDF equals scikit-learn's (so saved routers need no pickle)."""

from __future__ import annotations

from functools import partial

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer

from routegate.routers._charngrams import CharNgrams, char_wb_ngrams

CORPUS = [
    "how do I reset my password",
    "what's the weather in Paris",
    "show ticket 12",
    "Reset PASSWORD now!",
    "bitcoin price today",
    "explain ticket escalation",
] * 10


def test_char_wb_matches_sklearn_analyzer() -> None:
    reference = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).build_analyzer()
    for text in ["Hello  world", "a", "ticket #12?", "  x  y ", "é ü"]:
        assert sorted(char_wb_ngrams(text)) == sorted(reference(text))


def test_vector_equals_sklearn_transform() -> None:
    ngrams, _ = CharNgrams.fit(CORPUS, max_features=500)
    vectorizer = TfidfVectorizer(analyzer=partial(char_wb_ngrams, lo=2, hi=4), sublinear_tf=True, min_df=2)
    vectorizer.fit(CORPUS)
    for text in ["reset the password", "weather paris", "zzz", ""]:
        expected = vectorizer.transform([text]).toarray()[0]
        cols, weights = ngrams.vector(text)
        got = np.zeros(ngrams.size, dtype=np.float64)
        got[cols] = weights
        # same vocabulary, possibly different column order: compare by n-gram
        for gram, col in ngrams.vocabulary.items():
            assert (
                got[col] == np.float32(expected[vectorizer.vocabulary_[gram]])
                or abs(got[col] - expected[vectorizer.vocabulary_[gram]]) < 1e-6
            )


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_finite_unit_or_empty_vector(text: str) -> None:
    ngrams, _ = CharNgrams.fit(CORPUS)
    cols, weights = ngrams.vector(text)
    assert np.isfinite(weights).all()
    if len(cols):
        assert abs(float(np.linalg.norm(weights)) - 1.0) < 1e-5
