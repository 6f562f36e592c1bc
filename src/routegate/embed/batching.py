"""Dynamic batching for an encoder shared by concurrent requests.

A server embeds one short query per request. One forward pass over eight queries costs far less than eight passes
over one (the model's fixed per-call cost dominates short texts), so :class:`BatchingEncoder` lets concurrent
callers share passes: every ``encode`` call queues its texts; whichever caller gets the (single) run slot takes
everything queued so far, encodes it in one call to the wrapped encoder and hands each caller its rows. Callers
that arrive while a pass runs are served together by the next pass. No timer and no background thread: a lone
caller pays no wait at all, and batches form only when calls really overlap.

Call it from several threads (e.g. ``await asyncio.to_thread(encoder.encode, [text])`` in an async server; the
ONNX run releases the GIL, so the event loop keeps serving while a pass runs). Rows do not depend on their batch
mates for the embedded MiniLM encoder (dynamic padding with an attention mask), which the tests check.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from routegate.embed.protocol import Encoder, Vectors
from routegate.errors import ConfigurationError


@dataclass(slots=True, eq=False)
class _Call:
    """One caller's texts, and what the pass that served them left for it."""

    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    result: Vectors | None = None
    error: BaseException | None = None


class BatchingEncoder:
    """An :class:`~routegate.embed.protocol.Encoder` that serves overlapping ``encode`` calls with shared passes.

    ``max_batch_texts`` caps the texts of one pass (a caller's own texts are never split, so one call larger
    than the cap still runs as one pass). ``passes`` and ``texts_encoded`` count what ran (for metrics and tests).
    """

    def __init__(self, inner: Encoder, *, max_batch_texts: int = 64) -> None:
        if max_batch_texts < 1:
            raise ConfigurationError(f"max_batch_texts must be >= 1, got {max_batch_texts}")
        self.inner = inner
        self.max_batch_texts = max_batch_texts
        self.passes = 0
        self.texts_encoded = 0
        self._queue: deque[_Call] = deque()
        self._queue_lock = threading.Lock()
        self._run_slot = threading.Lock()

    def __repr__(self) -> str:
        return f"BatchingEncoder({self.inner!r}, max_batch_texts={self.max_batch_texts})"

    @property
    def queued_calls(self) -> int:
        """Calls waiting for a pass right now."""
        with self._queue_lock:
            return len(self._queue)

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (shape ``(len(texts), dim)``), sharing a pass with concurrent callers when they overlap."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        call = _Call(list(texts))
        with self._queue_lock:
            self._queue.append(call)
        while not call.done.is_set():
            with self._run_slot:
                if not call.done.is_set():
                    self._run_pass()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _run_pass(self) -> None:
        """Encode what is queued (up to the cap, oldest first) in one call; the run slot is held."""
        with self._queue_lock:
            batch: list[_Call] = []
            size = 0
            while self._queue and (not batch or size + len(self._queue[0].texts) <= self.max_batch_texts):
                call = self._queue.popleft()
                batch.append(call)
                size += len(call.texts)
        if not batch:  # pragma: no cover - the caller's own call is queued until a pass takes it
            return
        try:
            vectors = self.inner.encode([t for call in batch for t in call.texts])
            if vectors.shape[0] != size:
                raise ValueError(f"the wrapped encoder returned {vectors.shape[0]} rows for {size} texts")
        except BaseException as exc:  # every caller of the failed pass gets the error (its own), none hangs
            for call in batch:
                call.error = exc
                call.done.set()
            return
        finally:
            self.passes += 1
        self.texts_encoded += size
        start = 0
        for call in batch:
            call.result = vectors[start : start + len(call.texts)]
            start += len(call.texts)
            call.done.set()
