"""routegate.embed: text encoders (embedded offline default; others behind the same protocol).

* :class:`MiniLMEncoder` — all-MiniLM-L6-v2 as int8 ONNX (onnxruntime + tokenizers), offline, no torch; its linear
  layers run as int8 products with fixed activation scales, so vectors do not depend on batch mates.
* :func:`default_encoder` — the process-wide :class:`MiniLMEncoder` (loads lazily on first use).
* :class:`BatchingEncoder` — wraps an encoder so that concurrent calls share forward passes (servers);
  :func:`encode_async` embeds from a coroutine without blocking the event loop.
* :class:`MemoEncoder` + :func:`request_scope` — a text embedded twice in one request is embedded once.
* :class:`HashingEncoder` — deterministic hashing encoder for tests and model-free wiring.
* :class:`OpenAIEncoder` — any OpenAI-compatible ``/v1/embeddings`` endpoint (``ROUTEGATE_EMBEDDINGS_*``); its
  faults are :class:`~routegate.embed.errors.EmbeddingError` (imported on first use: the ``openai`` SDK is slow to
  import).
"""

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.embed.batching import BatchingEncoder, encode_async
from routegate.embed.hashing import HashingEncoder
from routegate.embed.memo import MemoEncoder, request_scope
from routegate.embed.minilm import MiniLMEncoder, default_encoder
from routegate.embed.protocol import Encoder

if TYPE_CHECKING:
    from routegate.embed.openai_encoder import OpenAIEncoder

__all__ = [
    "BatchingEncoder",
    "Encoder",
    "HashingEncoder",
    "MemoEncoder",
    "MiniLMEncoder",
    "OpenAIEncoder",
    "default_encoder",
    "encode_async",
    "request_scope",
]

__getattr__, __dir__ = _lazy_exports(
    __name__, {"OpenAIEncoder": "openai_encoder"}, __all__, moved={"AsyncEncoder": "protocol", "Vectors": "protocol"}
)
