"""A router fitted to a desk (``routegate fit --desk DIR``, with ``--finetune`` too): trained on the desk's own
examples — the generated ones and the hand-edited ones of ``desk.toml``'s ``[[routes]]``, each labelled with the
engine route of its kind — and used as the desk's embedding layer when ``[router] fitted`` names it.

The fitted router records the examples it learned from (:data:`FIT_RECORD`): a desk whose examples changed since
says so when it starts (fit again), and keeps routing with what it has.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tomllib
from pathlib import Path
from typing import Final

from routegate.apps.configured.config import CONFIG_FILE, DeskConfig, DeskConfigError, parse_config, resolve
from routegate.apps.configured.mistakes import config_file
from routegate.apps.configured.routes import KIND_ROUTE, present_routes, route_examples
from routegate.apps.support.router import embedding_layer
from routegate.apps.support.semantic import DEFAULT_ROUTE, EmbeddingLayer, FittedSemanticLayer
from routegate.apps.support.vector_cache import VectorCache
from routegate.embed import Encoder
from routegate.routers.data import LabelledExample

logger = logging.getLogger(__name__)

FIT_RECORD: Final = "desk-fit.json"
"""Beside the saved router: the desk's name and the hash of the examples it was fitted on."""
DEFAULT_FITTED: Final = "router"
"""Where ``fit --desk DIR`` saves the router without ``-o``: ``DIR/router``."""


def training_examples(config: DeskConfig) -> list[LabelledExample]:
    """Every example of every configured route, labelled with its kind's engine route (``POSTGRES``, ...)."""
    seen: set[tuple[str, str]] = set()
    out: list[LabelledExample] = []
    for route in config.routes:
        label = KIND_ROUTE[route.kind]
        for text in route.examples:
            if (text, label) not in seen:
                seen.add((text, label))
                out.append(LabelledExample(text, label))
    return out


def examples_sha256(config: DeskConfig) -> str:
    digest = hashlib.sha256()
    for example in training_examples(config):
        digest.update((json.dumps([example.text, example.label], ensure_ascii=False) + "\n").encode("utf-8"))
    return digest.hexdigest()


def record_fit(router_dir: Path, config: DeskConfig) -> None:
    """Write :data:`FIT_RECORD` into the saved router's directory."""
    record = {"desk": config.desk.name, "examples_sha256": examples_sha256(config)}
    (router_dir / FIT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def desk_embedding_layer(
    config: DeskConfig, desk_dir: Path, encoder: Encoder, *, cache_dir: Path | None = None
) -> EmbeddingLayer:
    """The desk's embedding layer: the fitted router ``[router] fitted`` names; else, with ``[router]
    fit_at_start``, a router fitted on the desk's examples the way the built-in desk fits its own (cached in
    ``cache_dir``, the data directory; ``None`` fits every time); else the nearest examples (their vectors cached in
    ``cache_dir`` for this desk and encoder: :mod:`~routegate.apps.support.vector_cache`; ``None`` embeds them
    every time)."""
    if config.router.fitted is not None:
        path = resolve(Path(desk_dir), config.router.fitted)
        family = _fitted_family(path)
        named = config.router.encoder
        if named is not None and family != named:
            raise DeskConfigError(
                f"{config_file(desk_dir)}: router.fitted: {path} was fitted with the {family!r} encoder, not "
                f"router.encoder = {named!r}: fit it again with `routegate fit --desk {desk_dir} --encoder {named}`, "
                "or set router.encoder to the router's"
            )
        return load_fitted(path, config, encoder)
    if config.router.fit_at_start:
        present = present_routes(config)
        examples = {route: texts for route, texts in route_examples(config).items() if route in present}
        return FittedSemanticLayer.load_or_fit(encoder, cache_dir, examples, routes=present)
    cache = None if cache_dir is None else VectorCache(cache_dir, owner=str(Path(desk_dir).resolve()))
    return embedding_layer(config, encoder, cache=cache)


def load_fitted(path: Path, config: DeskConfig, encoder: Encoder) -> FittedSemanticLayer:
    """The router saved at ``path`` as the desk's layer, with its own fine-tuned encoder when it holds one (else
    ``encoder``, the desk's, when the router was fitted with the same model). A router fitted with another family
    than MiniLM's (an embeddings endpoint, ``multilingual-e5``) routes with the desk's ``encoder`` of that family
    (``[router] encoder``); loading refuses it when its model or dimension differ."""
    from routegate.embed.minilm import MiniLMEncoder
    from routegate.embed.protocol import encoder_name
    from routegate.routers.persist import MINILM, saved_encoder
    from routegate.routers.semantic import SemanticRouter

    family = _fitted_family(path)
    if family != MINILM and family == encoder_name(encoder):
        chosen = encoder
    else:
        own = saved_encoder(path)
        chosen = encoder if isinstance(own, MiniLMEncoder) and own.model_id == encoder.model_id else own
    router = SemanticRouter.load(path, encoder=chosen, default_route=DEFAULT_ROUTE)
    _warn_if_stale(path, config)
    return FittedSemanticLayer(router, routes=present_routes(config))


def _fitted_family(path: Path) -> str:
    """The family of the encoder the router saved at ``path`` was fitted with (``minilm``, ``openai``...)."""
    from routegate.routers.persist import encoder_identity

    family: str = encoder_identity(path)["name"]
    return family


def _warn_if_stale(path: Path, config: DeskConfig) -> None:
    try:
        record = json.loads((path / FIT_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or record.get("examples_sha256") != examples_sha256(config):
        logger.warning(
            "the fitted router %s was not fitted on this desk's examples as they are now; run "
            "`routegate fit --desk DIR` again to route with them",
            path,
        )


_ROUTER_HEADER: Final = re.compile(r"^\[router\][ \t]*(#.*)?$", re.MULTILINE)


def point_config_at(desk_dir: Path, router_dir: Path) -> str:
    """Set ``[router] fitted`` in ``DIR/desk.toml`` to ``router_dir`` (relative to the desk when inside it), and
    return the value. The file is edited in place, line by line (comments kept), checked by loading it, and
    replaced atomically; a ``fitted`` already there is replaced."""
    path = Path(desk_dir) / CONFIG_FILE
    text = path.read_text(encoding="utf-8")
    try:
        value = str(router_dir.resolve().relative_to(Path(desk_dir).resolve()))
    except ValueError:
        value = str(router_dir.resolve())
    line = f"fitted = {json.dumps(value)}"
    current = tomllib.loads(text).get("router", {}).get("fitted")
    if current is not None:
        edited = re.sub(r"^fitted[ \t]*=.*$", line, text, count=1, flags=re.MULTILINE)
    elif (header := _ROUTER_HEADER.search(text)) is not None:
        edited = text[: header.end()] + "\n" + line + text[header.end() :]
    else:
        edited = text.rstrip("\n") + f"\n\n[router]\n{line}\n"
    if parse_config(edited, path).router.fitted != value:
        raise DeskConfigError(f"{path}: could not set [router] fitted; add the line {line} under [router] yourself")
    staged = path.with_name(f".{CONFIG_FILE}.fit")
    staged.write_text(edited, encoding="utf-8")
    os.replace(staged, path)
    return value
