"""Encoders: shape, normalisation, batching invariance, truncation, laziness; the hashing test double."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.embed import Encoder, HashingEncoder, MiniLMEncoder, default_encoder
from routegate.errors import ConfigurationError


def test_construction_loads_nothing() -> None:
    encoder = MiniLMEncoder()
    assert encoder._session is None
    assert encoder._tokenizer is None
    assert encoder.dim == 384
    assert isinstance(encoder, Encoder)


@pytest.mark.parametrize(
    "kwargs",
    [{"batch_size": 0}, {"max_tokens": 1}, {"max_tokens": 512}, {"intra_op_num_threads": 0}],
)
def test_bad_configuration_is_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        MiniLMEncoder(**kwargs)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEncoder:
    encoder = MiniLMEncoder(batch_size=4)
    encoder.warm_up()
    return encoder


def test_vectors_are_unit_float32(minilm: MiniLMEncoder) -> None:
    vectors = minilm.encode(["How do I reset my password?", "", "weather in Paris", "ticket 12"])
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input(minilm: MiniLMEncoder) -> None:
    assert minilm.encode([]).shape == (0, 384)


def test_single_string_is_refused(minilm: MiniLMEncoder) -> None:
    with pytest.raises(TypeError):
        minilm.encode("not a list")  # type: ignore[arg-type]  # the misuse under test


def test_batching_and_padding_do_not_change_vectors(minilm: MiniLMEncoder) -> None:
    texts = [
        "hi",
        "a considerably longer sentence about resetting a forgotten password for the customer portal",
        "what's the bitcoin price",
        "show me the open tickets of Jane Smith",
        "ok",
        "explain ticket escalation",
    ]
    together = minilm.encode(texts)
    alone = np.vstack([minilm.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6, rtol=0)


def test_semantics(minilm: MiniLMEncoder) -> None:
    a, b, c = minilm.encode(["how do I reset my password", "I forgot my password", "what is the weather in Paris"])
    assert float(a @ b) > float(a @ c) + 0.2


def test_long_text_is_truncated(minilm: MiniLMEncoder) -> None:
    tokenizer = minilm._tokenizer
    assert tokenizer is not None
    assert len(tokenizer.encode("word " * 1000).ids) == 256
    long_a = minilm.encode(["word " * 1000])
    long_b = minilm.encode(["word " * 300])
    np.testing.assert_allclose(long_a, long_b, atol=1e-5)


def test_default_encoder_is_shared() -> None:
    assert default_encoder() is default_encoder()


def test_hashing_encoder_is_deterministic_and_unit() -> None:
    encoder = HashingEncoder(dim=64)
    assert isinstance(encoder, Encoder)
    v1 = encoder.encode(["reset my password", "", "!!!"])
    v2 = HashingEncoder(dim=64).encode(["reset my password", "", "!!!"])
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_allclose(np.linalg.norm(v1, axis=1), 1.0, atol=1e-6)
    a, b, c = encoder.encode(["reset my password", "password reset please", "weather in paris"])
    assert float(a @ b) > float(a @ c)


def test_hashing_encoder_refuses_tiny_dim() -> None:
    with pytest.raises(ConfigurationError):
        HashingEncoder(dim=2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=5))
def test_any_text_encodes_to_finite_unit_rows(texts: list[str]) -> None:
    for encoder in (HashingEncoder(dim=32), default_encoder()):
        vectors = encoder.encode(texts)
        assert vectors.shape == (len(texts), encoder.dim)
        assert np.isfinite(vectors).all()
        if texts:
            np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
