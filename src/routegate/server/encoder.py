"""The encoder a server process uses: the embedded MiniLM with few onnxruntime threads, behind dynamic batching.

One onnxruntime thread per process by default (``ROUTEGATE_SERVER_ENCODER_THREADS``): more threads spin-wait after
each call and contend with the event loop and PostgreSQL on a small machine (measured in docs/benchmarks/server.md).
The :class:`~routegate.embed.BatchingEncoder` lets turns that embed at the same time share one forward pass; the
desk calls the encoder from worker threads, so the event loop keeps serving while a pass runs.
"""

from __future__ import annotations

from routegate.embed import BatchingEncoder, MiniLMEncoder
from routegate.settings import Settings


def serving_encoder(settings: Settings) -> BatchingEncoder:
    """A batching MiniLM encoder with ``settings.server_encoder_threads`` onnxruntime threads."""
    return BatchingEncoder(MiniLMEncoder(intra_op_num_threads=settings.server_encoder_threads))
