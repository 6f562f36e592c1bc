"""The shared part of encoders that wrap another one (batching, memoising, counting): the wrapped encoder's
``dim``, ``model_id`` and ``name`` pass through, so a wrapper is interchangeable with what it wraps (saved routers and
caches keyed by ``model_id`` still match)."""

from __future__ import annotations

from routegate.embed.protocol import Encoder, encoder_name


class EncoderWrapper:
    """Holds ``inner`` and reports its ``dim`` and ``model_id``; subclasses add ``encode`` (and ``aencode``)."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def name(self) -> str:
        return encoder_name(self.inner)
