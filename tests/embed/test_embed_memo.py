"""MemoEncoder: within one request scope a text is embedded once; nothing is kept across scopes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from routegate.embed import BatchingEncoder, HashingEncoder, MemoEncoder, encode_async, request_scope
from routegate.embed.protocol import AsyncEncoder, Vectors


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


class Gate(HashingEncoder):
    """Counts calls; each call waits for the test to open the gate (so a prefetch is still running)."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__(dim=16)
        self.texts: list[str] = []
        self.gate = asyncio.Event()
        self.fail = fail

    async def aencode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("encoder down")
        return super().encode(texts)


async def test_a_prefetch_is_awaited_not_repeated() -> None:
    inner = Gate()
    encoder = MemoEncoder(inner)
    with request_scope():
        encoder.prefetch("early")
        encoder.prefetch("early")  # already there: nothing new
        waiting = asyncio.create_task(encoder.aencode(["early"]))
        await asyncio.sleep(0)
        assert not waiting.done()
        inner.gate.set()
        vector = await waiting
        with request_scope():  # re-entrant: the same scope
            again = await encoder.aencode(["early"])
    assert inner.texts == ["early"]
    np.testing.assert_array_equal(vector, again)
    np.testing.assert_array_equal(vector[0], HashingEncoder(dim=16).encode(["early"])[0])


async def test_a_failed_prefetch_is_retried_by_the_caller() -> None:
    inner = Gate(fail=True)
    encoder = MemoEncoder(inner)
    inner.gate.set()
    with request_scope():
        encoder.prefetch("x")
        with pytest.raises(RuntimeError, match="encoder down"):
            await encoder.aencode(["x"])
    assert inner.texts == ["x", "x"]  # the prefetch, then the caller's own attempt


async def test_the_scope_cancels_what_is_still_running_and_prefetch_needs_a_scope() -> None:
    inner = Gate()
    encoder = MemoEncoder(inner)
    encoder.prefetch("no scope")  # does nothing outside a scope
    with request_scope():
        encoder.prefetch("late")
        await asyncio.sleep(0)
        memo_task = next(t for t in asyncio.all_tasks() if t is not asyncio.current_task())
    await asyncio.sleep(0)
    assert memo_task.cancelled()
    assert inner.texts == ["late"]


async def test_a_thread_does_not_wait_for_a_prefetch() -> None:
    inner = Gate()
    encoder = MemoEncoder(inner)
    with request_scope():
        encoder.prefetch("t")
        assert encoder.encode(["t"]).shape == (1, 16)  # embedded inline instead
        inner.gate.set()


async def test_encoders_of_two_models_in_one_scope_keep_their_own_vectors() -> None:
    """A desk whose knowledge base embeds with another model than its router: the message's vector from one model
    is never handed to the other (it is of another space, maybe of another dimension)."""
    small, large = HashingEncoder(dim=8), HashingEncoder(dim=32)
    assert small.model_id != large.model_id
    router, knowledge = MemoEncoder(small), MemoEncoder(large)
    with request_scope():
        router.prefetch("how do I reset my password?")
        routed = await router.aencode(["how do I reset my password?"])
        searched = await knowledge.aencode(["how do I reset my password?"])
        again = knowledge.encode(["how do I reset my password?"])
    assert routed.shape == (1, 8) and searched.shape == (1, 32)
    np.testing.assert_array_equal(searched, large.encode(["how do I reset my password?"]))
    np.testing.assert_array_equal(again, searched)
