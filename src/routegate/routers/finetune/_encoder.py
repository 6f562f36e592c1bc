"""The encoder a fine-tuned router carries: its own int8 ONNX model, run by onnxruntime.

No torch here: a saved fine-tuned router loads and routes with onnxruntime only. The model is quantised with fixed
activation scales (:mod:`routegate.routers.finetune._quantize`), so a text's vector is the same alone and in any
batch: routing never depends on which other requests share a pass (a server's
:class:`~routegate.embed.BatchingEncoder`, a fit's batches).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from routegate.embed.minilm import MiniLMEncoder
from routegate.embed.protocol import Vectors
from routegate.embed.wrapper import EncoderWrapper
from routegate.errors import ConfigurationError
from routegate.routers._files import MODEL_MAX_BYTES, read_router_file

MODEL_FILE = "encoder.onnx"
MODEL_ID_PREFIX = "routegate-finetuned:all-MiniLM-L6-v2"


class _RouterModelEncoder(MiniLMEncoder):
    """MiniLM running a model file read as a saved router's file: a regular file of at most
    :data:`~routegate.routers._files.MODEL_MAX_BYTES`, never through a symbolic link, its SHA-256 checked when
    one is given."""

    def __init__(self, model_path: Path, *, sha256: str | None, intra_op_num_threads: int | None) -> None:
        super().__init__(model_path=model_path, intra_op_num_threads=intra_op_num_threads)
        self._file = model_path
        self._sha256 = sha256

    def _model(self) -> bytes:
        model = read_router_file(self._file.parent, self._file.name, MODEL_MAX_BYTES, what="the encoder model")
        if self._sha256 is not None and hashlib.sha256(model).hexdigest() != self._sha256:
            raise ConfigurationError(
                f"{self._file}: SHA-256 {hashlib.sha256(model).hexdigest()} differs from the manifest's "
                f"{self._sha256}; the model was changed after the router was saved — save or fit the router again"
            )
        return bytes(model)


class FinetunedEncoder(EncoderWrapper):
    """A fine-tuned all-MiniLM-L6-v2 as int8 ONNX (``model_path``), batch-invariant.

    ``model_id`` names this model (a saved router refuses any other encoder); ``card`` is its provenance (base
    model, data hashes, hyper-parameters, validation figures), written into a saved router's manifest. The model
    file is read when the session loads, as a saved router's files are (a regular file, no symbolic link, at most
    2 GiB); with ``sha256`` its hash must match.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        model_id: str,
        card: Mapping[str, Any] | None = None,
        intra_op_num_threads: int | None = None,
        sha256: str | None = None,
    ) -> None:
        super().__init__(
            _RouterModelEncoder(Path(model_path), sha256=sha256, intra_op_num_threads=intra_op_num_threads)
        )
        self.model_path = Path(model_path)
        self.card: dict[str, Any] = dict(card or {})
        self._model_id = model_id

    def __repr__(self) -> str:
        return f"FinetunedEncoder({str(self.model_path)!r}, model_id={self._model_id!r})"

    @property
    def model_id(self) -> str:
        return self._model_id

    def warm_up(self) -> None:
        """Load the ONNX session now (otherwise the first ``encode`` does it)."""
        inner = self.inner
        assert isinstance(inner, MiniLMEncoder)
        inner.warm_up()

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: ``(len(texts), 384)`` float32 unit rows."""
        return self.inner.encode(texts)


def finetuned_of(encoder: object) -> FinetunedEncoder | None:
    """The :class:`FinetunedEncoder` inside ``encoder`` (itself, or under wrappers that keep it as ``inner``)."""
    for _ in range(8):  # wrappers nest a few levels at most
        if isinstance(encoder, FinetunedEncoder):
            return encoder
        encoder = getattr(encoder, "inner", None)
        if encoder is None:
            return None
    return None
