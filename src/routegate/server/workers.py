"""The app of one worker process of ``routegate serve --workers N``: uvicorn imports
:func:`app_from_environment` in each worker; the worker opens its own desk (its own connection pool, encoder and
event loop) in the app's lifespan, on the ``DATABASE_URL`` the parent process set up (and primed) for all."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from routegate._extras import needs

with needs("server"):
    from fastapi import FastAPI

from routegate.apps.support.contracts import (
    Message,
    ReportsModelHealth,
    SerialisesSessions,
    SupportDesk,
    SupportEvent,
    TakesHistory,
    TurnResult,
    takes_tenant,
)
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.errors import RuntimeFaultError
from routegate.server._turns import start_turn
from routegate.server.app import create_app
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.apps.support.desk import SupportAgent


class DeferredDesk:
    """A :class:`SupportDesk` that forwards to a desk bound later (when the worker's event loop runs)."""

    def __init__(self) -> None:
        self._desk: SupportDesk | None = None
        self._tenanted = True

    def bind(self, desk: SupportDesk | None) -> None:
        self._desk = desk
        self._tenanted = desk is None or takes_tenant(desk)

    @property
    def desk(self) -> SupportDesk:
        if self._desk is None:
            raise RuntimeFaultError("the support desk of this worker is not started")
        return self._desk

    def _tenant(self, tenant: str) -> dict[str, str]:
        return {"tenant": tenant} if self._tenanted else {}

    def iter(
        self,
        message: str,
        *,
        session_id: str,
        tenant: str = ANONYMOUS,
        history: Sequence[Message] | None = None,
    ) -> AsyncIterator[SupportEvent]:
        return start_turn(self.desk, message, session_id, history, self._tenant(tenant))

    async def ask(self, message: str, *, session_id: str, tenant: str = ANONYMOUS) -> TurnResult:
        return await self.desk.ask(message, session_id=session_id, **self._tenant(tenant))

    async def history(self, session_id: str, *, tenant: str = ANONYMOUS) -> list[Message]:
        return await self.desk.history(session_id, **self._tenant(tenant))

    async def reset(self, session_id: str, *, tenant: str = ANONYMOUS) -> None:
        await self.desk.reset(session_id, **self._tenant(tenant))

    async def healthy(self) -> bool:
        return self._desk is not None and await self._desk.healthy()

    def model_health(self) -> str | None:
        desk = self._desk
        return desk.model_health() if isinstance(desk, ReportsModelHealth) else None

    def takes_history(self) -> bool:
        desk: object = self._desk
        return isinstance(desk, TakesHistory) and desk.takes_history()

    def serialises_sessions(self) -> bool:
        desk: object = self._desk
        return isinstance(desk, SerialisesSessions) and desk.serialises_sessions()

    def sessions_held(self) -> int:
        desk: object = self._desk
        return desk.sessions_held() if isinstance(desk, SerialisesSessions) else 0


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
    """uvicorn's ``factory=True`` entry point (settings from the environment, the desk opened in the lifespan)."""
    from routegate.server.heap import freeze_startup_heap

    settings = Settings()
    if not settings.database_url:
        raise RuntimeFaultError("a worker needs DATABASE_URL: run it through `routegate serve --workers N`")
    deferred = DeferredDesk()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_serving_desk(settings) as desk:
            deferred.bind(desk)
            freeze_startup_heap()  # full GC passes over the start-up heap were the p99 of /chat
            print(f"routegate: worker {os.getpid()} ready", flush=True)  # one line per worker, once it serves
            try:
                yield
            finally:
                deferred.bind(None)

    return create_app(desk=deferred, settings=settings, lifespan=lifespan)
