"""Embed a text once per request, however many parts of the request ask for it.

In the support desk the router's embedding layer embeds the user's message, and when it routes to the knowledge
base the vector tool embeds the same message again: two encoder passes (~5 ms of CPU each on a small machine) for
one vector. :class:`MemoEncoder` remembers the vectors of the texts embedded inside :func:`request_scope` (a
``ContextVar``: tasks and worker threads started inside the scope share it; other requests never see it) and
encodes only what is new. Outside a scope it is a plain pass-through, so nothing is kept across requests.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from routegate.embed.batching import encode_async
from routegate.embed.protocol import Encoder, Vectors

_SCOPE: ContextVar[dict[str, Vectors] | None] = ContextVar("routegate_embed_request_scope", default=None)


@contextmanager
def request_scope() -> Iterator[None]:
    """Within this block, every :class:`MemoEncoder` embeds a given text at most once."""
    token = _SCOPE.set({})
    try:
        yield
    finally:
        _SCOPE.reset(token)


class MemoEncoder:
    """An :class:`~routegate.embed.protocol.Encoder` that reuses vectors within a :func:`request_scope`."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"MemoEncoder({self.inner!r})"

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def encode(self, texts: Sequence[str]) -> Vectors:
        memo, missing = self._missing(texts)
        if memo is None:
            return self.inner.encode(texts)
        if missing:
            memo.update(zip(missing, self.inner.encode(missing), strict=True))
        return self._rows(memo, texts)

    async def aencode(self, texts: Sequence[str]) -> Vectors:
        memo, missing = self._missing(texts)
        if memo is None:
            return await encode_async(self.inner, texts)
        if missing:
            memo.update(zip(missing, await encode_async(self.inner, missing), strict=True))
        return self._rows(memo, texts)

    def _missing(self, texts: Sequence[str]) -> tuple[dict[str, Vectors] | None, list[str]]:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        memo = _SCOPE.get()
        if memo is None:
            return None, []
        return memo, list(dict.fromkeys(t for t in texts if t not in memo))

    def _rows(self, memo: dict[str, Vectors], texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([memo[t] for t in texts]).astype(np.float32, copy=False)
