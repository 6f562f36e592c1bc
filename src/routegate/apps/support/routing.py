"""The support router's dry run (``routegate route``): which route would handle a message, and would the desk's
policy let it through. No database, no tool.

:func:`support_router` builds the router ``route`` runs, from the settings (the desk they name, ``--desk`` /
``ROUTEGATE_DESK``, else the built-in one: :func:`desk_router`); :func:`route_line` routes one input
and checks the choice against the router's policy exactly as the desk's router step does (the same typed decision,
:meth:`.router.RouteChoice.decision`); :func:`route_batch` is a batch of them whose messages are embedded in one
encoder pass first (what ``routegate route --ray`` runs in each actor). The command line only wires these up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from routegate.core.policy import RouteRejection

if TYPE_CHECKING:
    from pathlib import Path

    from routegate.apps.support.router import SupportRouter
    from routegate.embed.memo import MemoEncoder
    from routegate.embed.protocol import Encoder
    from routegate.llm.openai_chat import OpenAIChatModel
    from routegate.llm.protocol import ChatModel
    from routegate.settings import Settings

E = TypeVar("E", bound="Encoder")


def support_router(settings: Settings, encoder: Encoder | None = None) -> tuple[SupportRouter, OpenAIChatModel | None]:
    """The router ``route`` runs — the desk's of ``settings`` (:func:`~routegate.apps.configured.routes.desk_directory`): rules, its
    embedding layer, the LLM when configured — and its LLM client (the caller closes it), if any. ``encoder``: the
    embedding layer's encoder where the desk's ``[router] encoder`` names none (default: the embedded one)."""
    from routegate.apps.configured.routes import desk_directory

    chat_model = _chat_model(settings)
    return desk_router(settings, desk_directory(settings), encoder, chat_model=chat_model), chat_model


def batch_router(settings: Settings) -> tuple[SupportRouter, MemoEncoder, OpenAIChatModel | None]:
    """:func:`support_router`'s router whose embedding layer encodes through a :class:`~routegate.embed.memo.MemoEncoder`
    of the encoder the desk names (the embedded one, an embeddings endpoint, the multilingual one), that memo (for
    :func:`route_batch`) and the LLM client, if any: what ``routegate route --ray`` builds in each actor."""
    from routegate.apps.configured.routes import desk_directory
    from routegate.embed.memo import MemoEncoder

    chat_model = _chat_model(settings)
    router, memo = _router(settings, desk_directory(settings), None, chat_model, MemoEncoder)
    return router, memo, chat_model


def _chat_model(settings: Settings) -> OpenAIChatModel | None:
    if settings.llm_enabled and settings.desk is None:  # your own desk's router routes with its offline stages
        from routegate.llm.openai_chat import OpenAIChatModel

        return OpenAIChatModel.from_settings(settings)
    return None


def desk_router(
    settings: Settings, desk_dir: Path, encoder: Encoder | None = None, *, chat_model: ChatModel | None = None
) -> SupportRouter:
    """The router of the desk at ``desk_dir`` alone (no database, no tool): its configuration's rules and embedding
    layer (a fitted one cached in the data directory) with the encoder its ``[router] encoder`` names (``encoder``,
    else the embedded MiniLM, where it names none), the LLM router when ``chat_model`` is given."""
    router, _ = _router(settings, desk_dir, encoder, chat_model, _as_it_is)
    return router


def _as_it_is(encoder: Encoder) -> Encoder:
    return encoder


def _router(
    settings: Settings,
    desk_dir: Path,
    encoder: Encoder | None,
    chat_model: ChatModel | None,
    wrap: Callable[[Encoder], E],
) -> tuple[SupportRouter, E]:
    """:func:`desk_router`'s router, its embedding layer encoding through ``wrap`` of the encoder the desk names, and
    that wrapped encoder. The desk's modules are imported before any encoder is built, so that a missing ``desk``
    extra is what a command without it reports."""
    from routegate.apps.configured.config import load_config
    from routegate.apps.configured.encoders import router_encoder
    from routegate.apps.configured.fitted import desk_embedding_layer
    from routegate.apps.support.router import SupportRouter

    config = load_config(desk_dir)
    chosen = wrap(router_encoder(config, desk_dir, settings, encoder))
    semantic = desk_embedding_layer(config, desk_dir, chosen, cache_dir=settings.data_dir)
    return SupportRouter(config, semantic=semantic, chat_model=chat_model), chosen


async def route_line(router: SupportRouter, item: dict[str, Any], *, as_json: bool) -> str:
    """The line ``route`` prints for one input (``{"text": ...}``, optionally with the expected ``route``)."""
    text = item["text"]
    choice = await router.route_choice(text)
    verdict = router.policy.validate(choice.decision(text).raw)
    out: dict[str, Any] = {"text": text, **choice.to_dict()}
    out["policy"] = "refused: " + verdict.stop_reason if isinstance(verdict, RouteRejection) else "allowed"
    if "route" in item:
        out["expected"] = item["route"]
        out["correct"] = item["route"] == choice.route
    return json.dumps(out, ensure_ascii=False) if as_json else f"{choice.route}  ({choice.layer}: {choice.why})"


async def route_batch(
    router: SupportRouter, encoder: MemoEncoder, items: list[dict[str, Any]], *, as_json: bool
) -> list[str]:
    """:func:`route_line` for each item, in order, the messages the rules leave to the embedding layer embedded
    in one ``encoder`` pass first (``router``'s semantic layer must encode through ``encoder``)."""
    from routegate.embed.memo import request_scope

    with request_scope():
        to_embed = [item["text"] for item in items if router.rules.match(item["text"]).route is None]
        if to_embed and router.semantic is not None:
            encoder.encode(list(dict.fromkeys(to_embed)))  # one batched pass; route_line reuses the vectors
        return [await route_line(router, item, as_json=as_json) for item in items]
