"""The encoders a desk embeds with, as its ``desk.toml`` names them: ``[router] encoder`` for the router's embedding
layer, ``[knowledge] encoder`` (default: the router's) for the knowledge base's documents and questions.

A name is one :func:`~routegate.embed.choice.encoder_named` builds (``minilm``, ``openai`` from the settings'
``ROUTEGATE_EMBEDDINGS_*``, ``multilingual-e5``). Neither named, or ``minilm``: the caller's default encoder, else the
process-wide embedded MiniLM, exactly as a desk embedded before it could choose. Two fields naming the same encoder
share one instance (one client, one loaded model); a knowledge encoder different from the router's is a second one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from routegate.apps.configured.config import DeskConfig, DeskConfigError
from routegate.apps.configured.mistakes import config_file
from routegate.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from routegate.embed.protocol import Encoder
    from routegate.settings import Settings

DEFAULT_ENCODER: Final = "minilm"


def desk_encoders(
    config: DeskConfig, desk_dir: Path, settings: Settings, default: Encoder | None = None
) -> tuple[Encoder, Encoder]:
    """The router's encoder and the knowledge base's (the same object when their names agree). ``default``: what
    ``minilm`` (and no name) means for this desk (a server's batching MiniLM, a test's encoder); ``None``: the
    embedded MiniLM. A named encoder that cannot be built (``openai`` without ``ROUTEGATE_EMBEDDINGS_MODEL``) is a
    :class:`~routegate.apps.configured.config.DeskConfigError` naming the file, the field and the settings."""
    router = config.router.encoder or DEFAULT_ENCODER
    knowledge = config.knowledge.encoder or router
    routing = router_encoder(config, desk_dir, settings, default)
    if knowledge == router:
        return routing, routing
    return routing, _built(knowledge, "knowledge.encoder", desk_dir, settings, default)


def router_encoder(config: DeskConfig, desk_dir: Path, settings: Settings, default: Encoder | None = None) -> Encoder:
    """The router's encoder alone (``routegate route``, ``desk eval``: no knowledge base), as for
    :func:`desk_encoders`."""
    return _built(config.router.encoder or DEFAULT_ENCODER, "router.encoder", desk_dir, settings, default)


def _built(name: str, field: str, desk_dir: Path, settings: Settings, default: Encoder | None) -> Encoder:
    from routegate.embed.choice import encoder_named
    from routegate.embed.minilm import default_encoder

    if name == DEFAULT_ENCODER:
        return default if default is not None else default_encoder()
    try:
        return encoder_named(name, settings=settings)
    except MissingExtraError:
        raise  # says which extra to install
    except ConfigurationError as exc:
        raise DeskConfigError(f"{config_file(desk_dir)}: {field} = {name!r}: {exc}") from None
