"""Dynamic batching for an encoder shared by concurrent requests.

A server embeds one short query per request. One forward pass over several queries costs less than one pass per
query (the model's fixed per-call cost), and, more importantly under load, a caller that arrives while a pass
runs waits for one more pass, not for one pass per caller ahead of it. :class:`BatchingEncoder` queues every
call's texts; whoever runs the next pass takes everything queued so far, encodes it in one call to the wrapped
encoder and hands each caller its rows. No timer: a lone caller pays no wait, and batches form only when calls
really overlap.

Two ways in:

* ``encode`` (threads): the calling thread waits; whichever waiting thread gets the run slot runs the next pass.
* ``aencode`` (coroutines): the caller awaits a future and holds no thread; passes run on one background thread
  the encoder owns. The ONNX run releases the GIL, so the event loop keeps serving while a pass runs. (Calling the
  thread API through ``asyncio.to_thread`` instead parks one executor thread per waiting caller; with the default
  executor's few threads, callers queued behind the executor, not the encoder: measured p99 of the vector tool's
  embedding 194-203 ms that way, against ~110 ms with threads to spare.)

Both kinds of call share the same queue and passes. Sharing a pass is safe only for an encoder whose rows do not
depend on their batch mates: the embedded MiniLM encoder's do not (padding is masked out, and its int8 activation
scales are fixed, not taken from the batch); the tests check it bit for bit. A dynamically quantised model would
not qualify: its activation scale comes from the whole batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed.protocol import AsyncEncoder, Encoder, Vectors
from routegate.embed.wrapper import EncoderWrapper
from routegate.errors import ConfigurationError


@dataclass(slots=True, eq=False)
class _Call:
    """One caller's texts, and what the pass that served them left for it."""

    texts: list[str]
    future: asyncio.Future[Vectors] | None = None  # set for ``aencode`` callers
    done: threading.Event = field(default_factory=threading.Event)
    result: Vectors | None = None
    error: BaseException | None = None

    def finish(self) -> None:
        self.done.set()
        future = self.future
        if future is not None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody is waiting any more
                future.get_loop().call_soon_threadsafe(_resolve, future, self.result, self.error)


def _resolve(future: asyncio.Future[Vectors], result: Vectors | None, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled while its texts were being encoded
        return
    if error is not None:
        future.set_exception(error)
    else:
        assert result is not None
        future.set_result(result)


class BatchingEncoder(EncoderWrapper):
    """An :class:`~routegate.embed.protocol.Encoder` that serves overlapping calls with shared passes.

    ``max_batch_texts`` caps the texts of one pass (a caller's own texts are never split, so one call larger
    than the cap still runs as one pass). ``passes`` and ``texts_encoded`` count what ran (for metrics and tests).
    """

    def __init__(self, inner: Encoder, *, max_batch_texts: int = 64) -> None:
        if max_batch_texts < 1:
            raise ConfigurationError(f"max_batch_texts must be >= 1, got {max_batch_texts}")
        super().__init__(inner)
        self.max_batch_texts = max_batch_texts
        self.passes = 0
        self.texts_encoded = 0
        self._queue: deque[_Call] = deque()
        self._queue_lock = threading.Lock()
        self._run_slot = threading.Lock()
        self._draining = False  # a drain of the queue is scheduled on the background thread
        self._executor: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"BatchingEncoder({self.inner!r}, max_batch_texts={self.max_batch_texts})"

    @property
    def queued_calls(self) -> int:
        """Calls waiting for a pass right now."""
        with self._queue_lock:
            return len(self._queue)

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (shape ``(len(texts), dim)``), sharing a pass with concurrent callers when they overlap."""
        if _trivial(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        call = _Call(list(texts))
        with self._queue_lock:
            self._queue.append(call)
        while not call.done.is_set():
            with self._run_slot:
                if not call.done.is_set():
                    self._run_pass()
        return _outcome(call)

    async def aencode(self, texts: Sequence[str]) -> Vectors:
        """``encode`` for coroutines: awaits its pass without holding a thread (passes run on a background one)."""
        if _trivial(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        call = _Call(list(texts), future=asyncio.get_running_loop().create_future())
        with self._queue_lock:
            self._queue.append(call)
            schedule, self._draining = not self._draining, True
        if schedule:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="routegate-encoder")
            self._executor.submit(self._drain)
        assert call.future is not None
        return await call.future

    def _drain(self) -> None:
        """Background thread: run passes until the queue is empty (thread callers may run some of them)."""
        while True:
            with self._run_slot:
                self._run_pass()
            with self._queue_lock:
                if not self._queue:
                    self._draining = False
                    return

    def _run_pass(self) -> None:
        """Encode what is queued (up to the cap, oldest first) in one call; the run slot is held."""
        with self._queue_lock:
            batch: list[_Call] = []
            size = 0
            while self._queue and (not batch or size + len(self._queue[0].texts) <= self.max_batch_texts):
                call = self._queue.popleft()
                batch.append(call)
                size += len(call.texts)
        if not batch:  # a thread caller ran the pass that had this drain's calls
            return
        try:
            vectors = self.inner.encode([t for call in batch for t in call.texts])
            if vectors.shape[0] != size:
                raise ValueError(f"the wrapped encoder returned {vectors.shape[0]} rows for {size} texts")
        except BaseException as exc:  # every caller of the failed pass gets the error (its own), none hangs
            for call in batch:
                call.error = exc
                call.finish()
            return
        finally:
            self.passes += 1
        self.texts_encoded += size
        start = 0
        for call in batch:
            call.result = vectors[start : start + len(call.texts)]
            start += len(call.texts)
            call.finish()


def _trivial(texts: Sequence[str]) -> bool:
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of strings, not a single string")
    return len(texts) == 0


def _outcome(call: _Call) -> Vectors:
    if call.error is not None:
        raise call.error
    assert call.result is not None
    return call.result


async def encode_async(encoder: Encoder, texts: Sequence[str]) -> Vectors:
    """Embed ``texts`` from a coroutine without blocking its event loop: the encoder's own ``aencode`` when it has
    one (:class:`~routegate.embed.protocol.AsyncEncoder`, e.g. :meth:`BatchingEncoder.aencode`), else its
    ``encode`` on a worker thread."""
    if isinstance(encoder, AsyncEncoder):
        return await encoder.aencode(texts)
    return await asyncio.to_thread(encoder.encode, texts)
