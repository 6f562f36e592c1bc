"""MemoEncoder: within one request scope a text is embedded once; nothing is kept across scopes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from routegate.embed import AsyncEncoder, BatchingEncoder, HashingEncoder, MemoEncoder, encode_async, request_scope
from routegate.embed.protocol import Vectors


class Counting(HashingEncoder):
    def __init__(self) -> None:
        super().__init__(dim=16)
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return super().encode(texts)


async def test_a_text_is_embedded_once_per_scope() -> None:
    inner = Counting()
    encoder = MemoEncoder(inner)
    with request_scope():
        first = await encoder.aencode(["a", "b"])
        again = encoder.encode(["b", "a", "c", "c"])
        third = await encode_async(encoder, ["a"])
    assert sorted(inner.texts) == ["a", "b", "c"]
    np.testing.assert_array_equal(again[:2], first[::-1])
    np.testing.assert_array_equal(third[0], first[0])
    assert again.dtype == np.float32 and again.shape == (4, 16)


async def test_nothing_is_kept_outside_or_across_scopes() -> None:
    inner = Counting()
    encoder = MemoEncoder(inner)
    encoder.encode(["a"])
    await encoder.aencode(["a"])
    with request_scope():
        encoder.encode(["a"])
    with request_scope():
        encoder.encode(["a"])
    assert inner.texts == ["a"] * 4


async def test_concurrent_requests_have_their_own_scopes() -> None:
    inner = Counting()
    encoder = MemoEncoder(BatchingEncoder(inner))

    async def request() -> None:
        with request_scope():
            await encoder.aencode(["same"])
            await encoder.aencode(["same"])

    await asyncio.gather(request(), request())
    assert inner.texts == ["same", "same"]  # once per request, not once overall


def test_edges_and_protocol() -> None:
    encoder = MemoEncoder(HashingEncoder(dim=8))
    assert isinstance(encoder, AsyncEncoder) and isinstance(BatchingEncoder(HashingEncoder()), AsyncEncoder)
    assert not isinstance(HashingEncoder(), AsyncEncoder)
    with request_scope():
        assert encoder.encode([]).shape == (0, 8)
        with pytest.raises(TypeError, match="not a single string"):
            encoder.encode("text")  # type: ignore[arg-type]  # the mistake under test
    assert (encoder.dim, encoder.model_id) == (8, HashingEncoder(dim=8).model_id)
