"""An app that opens its desk itself (``create_app(open_desk=...)``): the desk opens in the app's lifespan, in the
server's own event loop, and the services around it are built once it is open. While it is not open (before the
lifespan ran, after it ended, or under a server that runs no lifespan) ``app.state.services`` is ``None`` and the
endpoints answer 503 ``desk_not_open`` (:func:`routegate.server._deps.get_services`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from routegate._extras import needs

with needs("server"):
    from fastapi import FastAPI

from routegate.apps.support.contracts import SupportDesk
from routegate.server._turns import Services

OpenDesk = Callable[[], AbstractAsyncContextManager[SupportDesk]]
"""How to open a desk: called once per server start, the desk is open inside the context it returns."""

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def opening_lifespan(open_desk: OpenDesk, serve: Callable[[SupportDesk], Services], then: Lifespan | None) -> Lifespan:
    """The app's lifespan: open the desk, serve it (``app.state.services = serve(desk)``), then run ``then`` (the
    caller's own lifespan, which finds the desk open); on the way out, the same steps in reverse."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_desk() as desk:
            app.state.services = serve(desk)
            try:
                async with then(app) if then is not None else nullcontext():
                    yield
            finally:
                app.state.services = None

    return lifespan
