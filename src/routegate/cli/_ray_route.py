"""``routegate route --file F --ray``: the support router's dry run over Ray Data actors.

Each actor builds the support router once (rules, the fitted semantic layer from the data dir's cache, the LLM
when configured) and routes a batch per call: the messages the rules leave to the embedding layer are embedded in
one encoder pass first (a :class:`~routegate.embed.memo.MemoEncoder` scope), then each message is routed exactly
as ``routegate route`` does (:func:`routegate.apps.support.routing.route_batch`), so every printed line is the
single-process run's, in input order. Wiring only.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from routegate.routers.evaluation import progress_bar
from routegate.routers.ray_batch import BatchWorker, import_ray, map_in_order, ray_session
from routegate.settings import Settings


def _support_worker(settings: Settings, as_json: bool) -> BatchWorker:
    from routegate.apps.support.routing import batch_router, route_batch

    router, encoder, _chat_model = batch_router(settings)  # the actor's lifetime: closed when it exits
    loop = asyncio.new_event_loop()

    def run(items: list[Any]) -> list[Any]:
        return loop.run_until_complete(route_batch(router, encoder, items, as_json=as_json))

    return run


def route_on_ray(settings: Settings, inputs: list[dict[str, Any]], *, as_json: bool, actors: int | None) -> int:
    """Route ``inputs`` on Ray and print one line per input, in input order, with a progress bar on stderr."""
    from routegate.apps.support.routing import support_router

    import_ray()  # the missing extra is said before the router is fitted
    _router, chat_model = support_router(settings)  # fit and cache the semantic layer once here, not per actor
    if chat_model is not None:
        asyncio.run(chat_model.aclose())

    def make_worker() -> BatchWorker:
        return _support_worker(settings, as_json)

    progress = progress_bar(sys.stderr, label="route") if len(inputs) > 1 else None
    with ray_session():
        for line in map_in_order(inputs, make_worker, actors=actors, progress=progress):
            print(line, flush=False)
    sys.stdout.flush()
    return 0
