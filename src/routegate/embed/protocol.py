"""The encoder protocol: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from routegate._extras import needs

with needs("embed"):
    import numpy as np
    import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Encoder(Protocol):
    """Embeds texts. ``encode`` returns shape ``(len(texts), dim)``, float32, each row L2-normalised."""

    @property
    def dim(self) -> int: ...

    @property
    def model_id(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> Vectors: ...


@runtime_checkable
class AsyncEncoder(Encoder, Protocol):
    """An encoder that can also be awaited from a coroutine without blocking its event loop."""

    async def aencode(self, texts: Sequence[str]) -> Vectors: ...


def encoder_name(encoder: Encoder) -> str:
    """The encoder's family, as a saved router records it: its ``name`` attribute (``"minilm"``, ``"openai"``...),
    else its class name."""
    name = getattr(encoder, "name", None)
    return name if isinstance(name, str) and name else type(encoder).__name__
