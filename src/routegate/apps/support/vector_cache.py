"""The vectors of a desk's route examples, kept in the data directory between processes.

A configured desk's nearest-examples layer (:class:`~routegate.apps.support.semantic.ExampleEmbeddingLayer`) embeds
every example of every route when it is built: about half a second of CPU for the shop desk's 76 examples, most of
it loading the encoder's model, paid by every one-shot ``routegate ask --desk DIR`` although the examples rarely
change between two asks. :class:`VectorCache` keeps those vectors in one file per desk and encoder,
``<data dir>/desk-examples-<desk>-<key>.npy``:

* ``<desk>``: a digest of whose vectors they are (the desk directory) and the encoder's identity (family, model id,
  dimension); ``<key>``: a digest of the same identity, the routegate version and the texts in their order. A file is
  used only for exactly the texts and encoder it was written for; an edited example, another encoder or another
  routegate version looks for another file and embeds again.
* A file is written under a temporary name and renamed into place (a concurrent reader sees it whole or not at
  all); once written, the desk's other files for the same encoder (older examples) are removed.
* A file read back is untrusted input (the data directory may be shared, copied or damaged): it is read by the
  saved routers' hardened reader (:func:`~routegate.routers._files.read_router_array`: a regular file, no symbolic
  link followed, no pickle, the header's shape and dtype checked against the bytes there), and used only when it
  holds ``float32`` rows of the expected shape, all finite, each of unit length (as encoders return them; a zero
  row is what a zeroed block of a damaged file reads as, so vectors with one are neither written nor read).
  Anything else is logged and embedded again; the cache is never the reason a desk fails to start.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from routegate._extras import needs

with needs("desk"):
    import numpy as np

from routegate import __version__
from routegate._atomic import write_atomically
from routegate.embed.protocol import Encoder, Vectors, encoder_name
from routegate.errors import ConfigurationError

logger = logging.getLogger(__name__)

PREFIX: Final = "desk-examples-"
"""The start of every file name this cache writes in its directory (``routegate data`` lists them under it)."""
FORMAT: Final = 1
"""The version of the key's fields; a change here makes every file written before a miss."""
_UNIT_TOLERANCE: Final = 1e-3
_HEADER_BYTES: Final = 4096
"""Room for a ``.npy`` header (numpy writes 128 bytes for these arrays): a larger file is not read."""


@dataclass(frozen=True, slots=True)
class VectorCache:
    """Vectors of a fixed list of texts, kept in ``directory`` for ``owner`` (the desk directory: one file per
    owner and encoder is kept)."""

    directory: Path
    owner: str

    def vectors(self, encoder: Encoder, texts: Sequence[str]) -> Vectors:
        """``encoder.encode(texts)``, read from this cache's file when one was written for exactly these texts and
        this encoder (and the file passes every check), else embedded and written there."""
        identity = [encoder_name(encoder), encoder.model_id, encoder.dim]
        family = _digest([FORMAT, self.owner, identity])[:12]
        name = f"{PREFIX}{family}-{_digest([FORMAT, __version__, identity, list(texts)])[:20]}.npy"
        stored = self._read(name, rows=len(texts), dim=encoder.dim)
        if stored is not None:
            return stored
        vectors = encoder.encode(texts)
        self._write(name, vectors, family=f"{PREFIX}{family}-")
        return vectors

    def _read(self, name: str, *, rows: int, dim: int) -> Vectors | None:
        from routegate.routers._files import read_router_array

        if not os.path.lexists(self.directory / name):
            return None
        try:
            array = read_router_array(
                self.directory,
                name,
                what="the desk's example vectors",
                max_bytes=_HEADER_BYTES + rows * dim * 4,
                remedy="embedding the examples again",
            )
        except ConfigurationError as exc:
            logger.warning("%s", exc)
            return None
        problem = _problem(array, rows=rows, dim=dim)
        if problem is not None:
            logger.warning("%s: %s; embedding the examples again", self.directory / name, problem)
            return None
        return array.copy()  # a view of the bytes read, read-only: the layer owns a writable array as before

    def _write(self, name: str, vectors: Vectors, *, family: str) -> None:
        if not _unit_rows(vectors):  # an example the encoder embeds as zero: a file of it would never be read back
            logger.info("the desk's example vectors are not cached: a row is not of unit length")
            return
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        try:
            write_atomically(self.directory / name, buffer.getbuffer(), scratch_prefix=PREFIX)
        except OSError as exc:
            logger.info(
                "the desk's example vectors are not cached (%s: %s); they are embedded at every start",
                self.directory,
                exc,
            )
            return
        for older in self.directory.glob(f"{family}*.npy"):
            if older.name != name:
                with contextlib.suppress(OSError):
                    older.unlink()


def _problem(array: np.ndarray, *, rows: int, dim: int) -> str | None:
    """What makes ``array`` unfit to stand for ``rows`` vectors of ``dim`` from an encoder, or ``None``."""
    if array.dtype != np.float32:
        return f"dtype {array.dtype}, not float32"
    if array.shape != (rows, dim):
        return f"shape {array.shape}, not ({rows}, {dim})"
    if not np.isfinite(array).all():
        return "a value is not finite"
    if not _unit_rows(array):
        return "a row is not of unit length"
    return None


def _unit_rows(array: np.ndarray) -> bool:
    """Is every row of unit length? A zero row is not: it is what a zeroed block of a damaged file reads as."""
    return bool(np.isclose(np.linalg.norm(array, axis=1), 1.0, rtol=0, atol=_UNIT_TOLERANCE).all())


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()
