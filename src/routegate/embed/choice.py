"""Encoders chosen by name: what ``routegate fit --encoder NAME`` and a desk's ``encoder = "NAME"`` build.

=================== ========================================================= ==============================
name                encoder                                                   needs
=================== ========================================================= ==============================
``minilm``          :class:`~routegate.embed.MiniLMEncoder` (the default)      the ``embed`` extra
``openai``          :class:`~routegate.embed.OpenAIEncoder` from settings      ``ROUTEGATE_EMBEDDINGS_MODEL``
``multilingual-e5`` :class:`~routegate.embed.multilingual.MultilingualE5Encoder` the ``multilingual`` extra
=================== ========================================================= ==============================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from routegate.embed.protocol import Encoder
from routegate.errors import ConfigurationError

if TYPE_CHECKING:
    from routegate.settings import Settings

ENCODER_NAMES: Final = ("minilm", "openai", "multilingual-e5")


def encoder_named(name: str, *, settings: Settings | None = None, intra_op_num_threads: int | None = None) -> Encoder:
    """The encoder called ``name`` (:data:`ENCODER_NAMES`); ``openai`` is built from ``settings``'
    ``ROUTEGATE_EMBEDDINGS_*``; ``intra_op_num_threads`` applies to MiniLM."""
    if name == "minilm":
        from routegate.embed.minilm import MiniLMEncoder

        return MiniLMEncoder(intra_op_num_threads=intra_op_num_threads)
    if name == "openai":
        if settings is None:
            raise ConfigurationError("the openai encoder is built from settings (ROUTEGATE_EMBEDDINGS_*): pass them")
        from routegate.embed.openai_encoder import OpenAIEncoder

        return OpenAIEncoder.from_settings(settings)
    if name == "multilingual-e5":
        from routegate.embed.multilingual import MultilingualE5Encoder

        return MultilingualE5Encoder()
    raise ConfigurationError(f"unknown encoder {name!r}: choose one of {', '.join(ENCODER_NAMES)}")


def saved_family_encoder(family: str, model_id: str, path: Path, *, intra_op_num_threads: int | None = None) -> Encoder:
    """The encoder a saved router of ``family`` (not MiniLM's) needs, when routegate can build it from the name
    alone; otherwise :class:`~routegate.errors.ConfigurationError` saying what to pass."""
    if family == "multilingual-e5":
        return encoder_named(family)
    if family == "openai":
        raise ConfigurationError(
            f"{path} was fitted with the embeddings endpoint model {model_id!r}: pass the encoder "
            f"(OpenAIEncoder(model={model_id!r}, base_url=..., api_key=...)), or for the CLI set "
            f"ROUTEGATE_EMBEDDINGS_MODEL={model_id} and ROUTEGATE_EMBEDDINGS_BASE_URL"
        )
    raise ConfigurationError(
        f"{path} was fitted with a {family!r} encoder ({model_id!r}) that routegate cannot build by name: pass it "
        "as encoder="
    )
