"""Embed a text once per request, however many parts of the request ask for it.

In the support desk the router's embedding layer embeds the user's message, and when it routes to the knowledge
base the vector tool embeds the same message again: two encoder passes (~5 ms of CPU each on a small machine) for
one vector. :class:`MemoEncoder` remembers the vectors of the texts embedded inside :func:`request_scope` (a
``ContextVar``: tasks and worker threads started inside the scope share it; other requests never see it) and
encodes only what is new. The vectors are kept per model (``model_id``): two encoders of different models in one
request (a desk whose knowledge base embeds with another model than its router) never reuse each other's. Outside a scope it is a plain pass-through, so nothing is kept across requests.
:meth:`MemoEncoder.prefetch` starts an embedding early (e.g. while the request's other I/O runs); a later call
for the same text waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed.batching import encode_async
from routegate.embed.protocol import Vectors
from routegate.embed.wrapper import EncoderWrapper

_Memo = dict[str, "Vectors | asyncio.Task[Vectors]"]
_SCOPE: ContextVar[dict[str, _Memo] | None] = ContextVar("routegate_embed_request_scope", default=None)
"""The open scope's vectors: one memo per model (``model_id``), text -> vector or the prefetch computing it."""
logger = logging.getLogger(__name__)


@contextmanager
def request_scope() -> Iterator[None]:
    """Within this block, every :class:`MemoEncoder` embeds a given text at most once. Re-entrant: an inner
    ``request_scope()`` joins the one already open. Prefetches still running at the end are cancelled."""
    if _SCOPE.get() is not None:
        yield
        return
    memos: dict[str, _Memo] = {}
    token = _SCOPE.set(memos)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        for memo in memos.values():
            for value in memo.values():
                if isinstance(value, asyncio.Task) and not value.done():
                    value.cancel()


class MemoEncoder(EncoderWrapper):
    """An :class:`~routegate.embed.protocol.Encoder` that reuses vectors within a :func:`request_scope`."""

    def prefetch(self, text: str) -> None:
        """Start embedding ``text`` now, in the background, for a later call in the same scope (which then waits
        for it instead of starting again). Outside a scope, or for a text already there, it does nothing."""
        memo = self._memo()
        if memo is None or text in memo:
            return
        task = asyncio.ensure_future(self._one(text))
        task.add_done_callback(_consume)
        memo[text] = task

    async def _one(self, text: str) -> Vectors:
        row: Vectors = (await encode_async(self.inner, [text]))[0]
        return row

    def encode(self, texts: Sequence[str]) -> Vectors:
        memo, missing = self._missing(texts)
        if memo is None:
            return self.inner.encode(texts)
        # a thread cannot wait for a prefetch running on an event loop: those texts are embedded here too
        missing += [t for t in dict.fromkeys(texts) if isinstance(memo.get(t), asyncio.Task)]
        if missing:
            memo.update(zip(missing, self.inner.encode(missing), strict=True))
        return self._rows(memo, texts)

    async def aencode(self, texts: Sequence[str]) -> Vectors:
        memo, missing = self._missing(texts)
        if memo is None:
            return await encode_async(self.inner, texts)
        for text in dict.fromkeys(texts):
            pending = memo.get(text)
            if isinstance(pending, asyncio.Task):
                try:
                    memo[text] = await asyncio.shield(pending)
                except Exception:  # the prefetch failed: embed it with the rest, and let that error surface
                    missing.append(text)
        if missing:
            memo.update(zip(missing, await encode_async(self.inner, missing), strict=True))
        return self._rows(memo, texts)

    def _missing(self, texts: Sequence[str]) -> tuple[_Memo | None, list[str]]:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        memo = self._memo()
        if memo is None:
            return None, []
        return memo, list(dict.fromkeys(t for t in texts if t not in memo))

    def _memo(self) -> _Memo | None:
        """This model's vectors in the open scope (``None`` outside one)."""
        memos = _SCOPE.get()
        return None if memos is None else memos.setdefault(self.model_id, {})

    def _rows(self, memo: _Memo, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [memo[t] for t in texts]
        assert not any(isinstance(row, asyncio.Task) for row in rows)
        return np.stack(rows).astype(np.float32, copy=False)  # type: ignore[arg-type]  # Tasks ruled out above


def _consume(task: asyncio.Task[Vectors]) -> None:
    """A prefetch nobody awaited must not log "exception never retrieved"; the caller that needs the text
    embeds it again and sees the error itself."""
    if not task.cancelled() and task.exception() is not None:
        logger.debug("embedding prefetch failed: %r", task.exception())
