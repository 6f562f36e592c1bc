"""The app of one worker process of ``routegate serve --workers N``: uvicorn imports
:func:`app_from_environment` in each worker; the worker opens its own desk (its own connection pool, encoder and
event loop) in the app's lifespan, on the ``DATABASE_URL`` the parent process set up (and primed) for all."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from routegate._extras import needs

with needs("server"):
    from fastapi import FastAPI

from routegate.errors import RuntimeFaultError
from routegate.server.app import create_app
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.apps.support.desk import SupportAgent


@asynccontextmanager
async def open_serving_desk(settings: Settings) -> AsyncIterator[SupportAgent]:
    """The desk one server process opens: your own (``settings.desk``, from ``--desk`` / ``ROUTEGATE_DESK``) or the
    built-in desk's configuration, with the serving encoder, its models loaded before the server listens. Used by
    ``serve`` / ``up``, the ``--workers N`` workers and the Ray Serve replicas."""
    from routegate.apps.support.factory import open_support_desk
    from routegate.server.encoder import load_encoders, serving_encoder

    async with open_support_desk(settings, encoder=serving_encoder(settings)) as desk:
        await load_encoders(desk)
        yield desk


def app_from_environment() -> FastAPI:
    """uvicorn's ``factory=True`` entry point (settings from the environment, the desk opened in the app's
    lifespan, in the worker's own event loop)."""
    from routegate.server.heap import freeze_startup_heap

    settings = Settings()
    if not settings.database_url:
        raise RuntimeFaultError("a worker needs DATABASE_URL: run it through `routegate serve --workers N`")

    @asynccontextmanager
    async def ready(app: FastAPI) -> AsyncIterator[None]:  # runs once the desk is open
        freeze_startup_heap()  # full GC passes over the start-up heap were the p99 of /chat
        print(f"routegate: worker {os.getpid()} ready", flush=True)  # one line per worker, once it serves
        yield

    return create_app(open_desk=functools.partial(open_serving_desk, settings), settings=settings, lifespan=ready)
