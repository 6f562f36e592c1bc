"""The encoder a server process uses: the embedded MiniLM with few onnxruntime threads, behind dynamic batching.

One onnxruntime thread per process by default (``ROUTEGATE_SERVER_ENCODER_THREADS``): more threads spin-wait after
each call and contend with the event loop and PostgreSQL on a small machine (measured in docs/benchmarks/server.md).
The :class:`~routegate.embed.BatchingEncoder` lets turns that embed at the same time share one forward pass; the
desk calls the encoder from worker threads, so the event loop keeps serving while a pass runs.

A server loads its encoders before it listens (:func:`load_encoders`): the desk's, its knowledge base's (the vector
tool's queries: the same one unless ``[knowledge] encoder`` names another) and its router's (the embedding layer:
the same one, or a fitted router's own fine-tuned encoder). The serving encoder is what a desk's ``minilm`` (or no
``encoder`` field) means; an encoder the desk names otherwise is built from the settings. Otherwise the first
turn that embeds would pay the model's load (about a second and a half), after ``/healthz`` already said ready.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from routegate.embed import BatchingEncoder, MiniLMEncoder
from routegate.embed.protocol import Encoder, warm_up
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.apps.support.desk import SupportAgent


def serving_encoder(settings: Settings) -> BatchingEncoder:
    """A batching MiniLM encoder with ``settings.server_encoder_threads`` onnxruntime threads."""
    return BatchingEncoder(MiniLMEncoder(intra_op_num_threads=settings.server_encoder_threads))


async def load_encoders(desk: SupportAgent) -> None:
    """Load the models of the encoders a turn of ``desk`` uses (off the event loop), so that ready means ready."""
    encoders: list[Encoder] = [desk.encoder]
    if desk.kb_encoder is not desk.encoder:  # [knowledge] encoder names another than the router's
        encoders.append(desk.kb_encoder)
    if desk.semantic is not None and desk.semantic.encoder is not desk.encoder:
        encoders.append(desk.semantic.encoder)
    for encoder in encoders:
        await asyncio.to_thread(warm_up, encoder)
