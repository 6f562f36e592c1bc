"""The encoder a fine-tuned router carries: its own int8 ONNX model, run by onnxruntime.

No torch here: a saved fine-tuned router loads and routes with onnxruntime only. The model is quantised with fixed
activation scales (:mod:`routegate.routers.finetune._quantize`), so a text's vector is the same alone and in any
batch: routing never depends on which other requests share a pass (a server's
:class:`~routegate.embed.BatchingEncoder`, a fit's batches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from routegate.embed.minilm import MiniLMEncoder
from routegate.embed.protocol import Vectors
from routegate.embed.wrapper import EncoderWrapper

MODEL_FILE = "encoder.onnx"
MODEL_ID_PREFIX = "routegate-finetuned:all-MiniLM-L6-v2"


class FinetunedEncoder(EncoderWrapper):
    """A fine-tuned all-MiniLM-L6-v2 as int8 ONNX (``model_path``), batch-invariant.

    ``model_id`` names this model (a saved router refuses any other encoder); ``card`` is its provenance (base
    model, data hashes, hyper-parameters, validation figures), written into a saved router's manifest.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        model_id: str,
        card: Mapping[str, Any] | None = None,
        intra_op_num_threads: int | None = None,
    ) -> None:
        super().__init__(MiniLMEncoder(model_path=model_path, intra_op_num_threads=intra_op_num_threads))
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
