"""BatchingEncoder: overlapping calls share passes, each caller gets exactly its rows, failures reach every caller."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.embed import BatchingEncoder, HashingEncoder, MiniLMEncoder, encode_async
from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError


class GatedEncoder:
    """Records every pass; the first pass blocks until the test opens the gate (so later calls pile up)."""

    def __init__(self, *, fail_on: Callable[[Sequence[str]], bool] = lambda texts: False) -> None:
        self.inner = HashingEncoder(dim=32)
        self.passes: list[list[str]] = []
        self.first_pass_entered = threading.Event()
        self.gate = threading.Event()
        self.fail_on = fail_on

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return "gated"

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.passes.append(list(texts))
        if len(self.passes) == 1:
            self.first_pass_entered.set()
            assert self.gate.wait(10), "the test never opened the gate"
        if self.fail_on(texts):
            raise RuntimeError(f"cannot encode {list(texts)}")
        return self.inner.encode(texts)


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state another thread reaches (bounded); the assertion names what never happened."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


def _start(encoder: BatchingEncoder, texts: list[str], results: dict[str, object]) -> threading.Thread:
    def call() -> None:
        try:
            results[texts[0]] = encoder.encode(texts)
        except Exception as exc:  # the test inspects what each caller got
            results[texts[0]] = exc

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def _pile_up(encoder: BatchingEncoder, gated: GatedEncoder, calls: list[list[str]]) -> dict[str, object]:
    """One call holds the first pass; ``calls`` queue behind it; then the gate opens and everything finishes."""
    results: dict[str, object] = {}
    first = _start(encoder, ["first"], results)
    assert gated.first_pass_entered.wait(10)
    threads = [_start(encoder, texts, results) for texts in calls]
    _wait_until(lambda: encoder.queued_calls == len(calls), f"{len(calls)} calls are queued")
    gated.gate.set()
    for thread in [first, *threads]:
        thread.join(10)
        assert not thread.is_alive()
    return results


def test_calls_that_arrive_during_a_pass_share_the_next_one() -> None:
    gated = GatedEncoder()
    encoder = BatchingEncoder(gated)
    calls = [["a1", "a2"], ["b1"], ["c1", "c2", "c3"]]
    results = _pile_up(encoder, gated, calls)
    assert gated.passes[0] == ["first"]
    assert len(gated.passes) == 2 and sorted(gated.passes[1]) == sorted(t for c in calls for t in c)
    reference = HashingEncoder(dim=32)
    for texts in [["first"], *calls]:
        got = results[texts[0]]
        assert isinstance(got, np.ndarray) and got.shape == (len(texts), 32)
        np.testing.assert_array_equal(got, reference.encode(texts))
    assert (encoder.passes, encoder.texts_encoded) == (2, 7)
    assert encoder.queued_calls == 0


def test_the_cap_splits_passes_between_callers_never_inside_one() -> None:
    gated = GatedEncoder()
    encoder = BatchingEncoder(gated, max_batch_texts=2)
    calls = [["a"], ["b"], ["c1", "c2", "c3"], ["d"]]
    results = _pile_up(encoder, gated, calls)
    assert all(len(p) <= 2 or len(p) == 3 for p in gated.passes[1:])
    assert ["c1", "c2", "c3"] in gated.passes  # one caller's texts stay together, even over the cap
    assert sum(len(p) for p in gated.passes) == 1 + 6
    for texts in calls:
        got = results[texts[0]]
        assert isinstance(got, np.ndarray) and got.shape == (len(texts), 32)


def test_a_failed_pass_fails_its_callers_only() -> None:
    gated = GatedEncoder(fail_on=lambda texts: "bad" in texts)
    encoder = BatchingEncoder(gated, max_batch_texts=2)
    results = _pile_up(encoder, gated, [["bad"], ["ok1"], ["ok2"], ["ok3"]])
    failed = {key for key, value in results.items() if isinstance(value, RuntimeError)}
    shared_with_bad = next(p for p in gated.passes if "bad" in p)
    assert failed == set(shared_with_bad)
    assert isinstance(results["first"], np.ndarray)
    assert encoder.encode(["after"]).shape == (1, 32)  # the encoder keeps working


def test_trivial_inputs_and_bad_arguments() -> None:
    encoder = BatchingEncoder(HashingEncoder(dim=16))
    assert encoder.encode([]).shape == (0, 16)
    assert encoder.passes == 0
    with pytest.raises(TypeError, match="not a single string"):
        encoder.encode("one string")  # type: ignore[arg-type]  # the mistake under test
    with pytest.raises(ConfigurationError, match="max_batch_texts"):
        BatchingEncoder(HashingEncoder(), max_batch_texts=0)
    assert (encoder.dim, encoder.model_id) == (16, HashingEncoder(dim=16).model_id)
    assert "max_batch_texts=64" in repr(encoder)


def test_a_wrong_row_count_from_the_wrapped_encoder_is_an_error() -> None:
    class Short(HashingEncoder):
        def encode(self, texts: Sequence[str]) -> Vectors:
            return super().encode(texts)[:-1]

    with pytest.raises(ValueError, match="returned 1 rows for 2 texts"):
        BatchingEncoder(Short()).encode(["a", "b"])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.text(max_size=30), min_size=1, max_size=4), min_size=1, max_size=8))
def test_any_mix_of_concurrent_calls_gets_its_own_rows(calls: list[list[str]]) -> None:
    reference = HashingEncoder(dim=32)
    encoder = BatchingEncoder(HashingEncoder(dim=32), max_batch_texts=5)
    got: list[Vectors | None] = [None] * len(calls)

    def call(i: int) -> None:
        got[i] = encoder.encode(calls[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for texts, vectors in zip(calls, got, strict=True):
        assert vectors is not None
        np.testing.assert_array_equal(vectors, reference.encode(texts))


def test_minilm_rows_do_not_depend_on_their_batch_mates() -> None:
    """What makes sharing passes safe for the embedded model: padding is masked out."""
    encoder = MiniLMEncoder(intra_op_num_threads=1)
    query = "How do I reset my password?"
    alone = encoder.encode([query])[0]
    mates = ["hi", query, "Which city is customer 3 from? And what is the status of ticket 2, please?"]
    together = encoder.encode(mates)[1]
    np.testing.assert_allclose(together, alone, atol=1e-6, rtol=0)


async def test_coroutines_share_passes_without_holding_threads() -> None:
    gated = GatedEncoder()
    encoder = BatchingEncoder(gated)
    first = asyncio.create_task(encoder.aencode(["first"]))
    assert await asyncio.to_thread(gated.first_pass_entered.wait, 10)
    later = [asyncio.create_task(encoder.aencode([f"t{i}", f"u{i}"])) for i in range(5)]
    await asyncio.sleep(0)  # let every task queue its call (they do so before their first await)
    assert encoder.queued_calls == 5
    gated.gate.set()
    results = await asyncio.gather(first, *later)
    assert len(gated.passes) == 2 and len(gated.passes[1]) == 10  # everything that waited went in one pass
    reference = HashingEncoder(dim=32)
    for i, got in enumerate(results[1:]):
        np.testing.assert_array_equal(got, reference.encode([f"t{i}", f"u{i}"]))
    assert (await encoder.aencode([])).shape == (0, 32)


async def test_a_cancelled_coroutine_does_not_disturb_the_others() -> None:
    gated = GatedEncoder()
    encoder = BatchingEncoder(gated)
    first = asyncio.create_task(encoder.aencode(["first"]))
    assert await asyncio.to_thread(gated.first_pass_entered.wait, 10)
    gone = asyncio.create_task(encoder.aencode(["gone"]))
    stays = asyncio.create_task(encoder.aencode(["stays"]))
    await asyncio.sleep(0)
    gone.cancel()
    gated.gate.set()
    assert (await first).shape == (1, 32) and (await stays).shape == (1, 32)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert (await encoder.aencode(["again"])).shape == (1, 32)


async def test_a_failed_pass_raises_in_each_awaiting_caller() -> None:
    encoder = BatchingEncoder(GatedEncoder(fail_on=lambda texts: True))
    encoder.inner.gate.set()  # type: ignore[attr-defined]  # no pile-up needed here
    with pytest.raises(RuntimeError, match="cannot encode"):
        await encoder.aencode(["x"])
    assert encoder.queued_calls == 0


async def test_thread_and_coroutine_callers_mix() -> None:
    encoder = BatchingEncoder(HashingEncoder(dim=32))
    reference = HashingEncoder(dim=32)
    texts = [[f"text {i}"] for i in range(20)]
    coroutine_results = asyncio.gather(*(encoder.aencode(t) for t in texts[:10]))
    thread_results = [asyncio.to_thread(encoder.encode, t) for t in texts[10:]]
    got = [*(await coroutine_results), *(await asyncio.gather(*thread_results))]
    for t, vectors in zip(texts, got, strict=True):
        np.testing.assert_array_equal(vectors, reference.encode(t))


async def test_encode_async_runs_a_plain_encoder_off_the_loop() -> None:
    main = threading.get_ident()
    seen: list[int] = []

    class Recording(HashingEncoder):
        def encode(self, texts: Sequence[str]) -> Vectors:
            seen.append(threading.get_ident())
            return super().encode(texts)

    assert (await encode_async(Recording(dim=8), ["a", "b"])).shape == (2, 8)
    assert seen and seen[0] != main
    assert (await encode_async(BatchingEncoder(HashingEncoder(dim=8)), ["a"])).shape == (1, 8)
