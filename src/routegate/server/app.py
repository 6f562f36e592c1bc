"""The app factory: wiring only. The desk and the settings are injected; nothing is built at import time."""

from __future__ import annotations

import logging
import warnings

from routegate._extras import needs

with needs("server"):
    from fastapi import FastAPI, Request
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import JSONResponse

from routegate import __version__
from routegate.apps.support.contracts import SupportDesk, takes_tenant
from routegate.errors import ConfigurationError
from routegate.server import _chat, _openai, _plan
from routegate.server._auth import KeyRing
from routegate.server._deps import services_of
from routegate.server._errors import error_response, install_error_handlers
from routegate.server._guard import BodyGuard
from routegate.server._lifespan import Lifespan, OpenDesk, opening_lifespan
from routegate.server._metrics import MetricsMiddleware, ServerMetrics
from routegate.server._shutdown import OpenRequests, ShutdownGuard
from routegate.server._turns import DATABASE_UNAVAILABLE, Services, SessionLocks, desk_healthy, limiter_for
from routegate.server.telemetry import configure_tracing, instrument
from routegate.settings import Settings

log = logging.getLogger(__name__)

DESCRIPTION = """The routegate support desk over HTTP.

* `POST /chat` streams Server-Sent Events `route` → `tool` → `token`* → `final` (or `error`);
  send `Accept: application/json` for one JSON body instead.
* `GET` / `DELETE /sessions/{id}`: a conversation's history, or forget it.
* `POST /v1/chat/completions`, `GET /v1/models`: OpenAI-compatible; the session is the `user` field or the
  `X-Session-Id` header.
* `GET /plan`: the desk's plan as a diagram's data (nodes, edges with their conditions); a turn's path is the
  `plan` entries of its `final` event's trace.
* `GET /healthz` (no key needed), `GET /metrics` (Prometheus).

When the server has API keys, send one as `Authorization: Bearer <key>` on everything but `/healthz`; each key
sees only the sessions its own turns created (404 for any other).
"""


def create_app(
    *,
    desk: SupportDesk | None = None,
    open_desk: OpenDesk | None = None,
    settings: Settings,
    metrics: ServerMetrics | None = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """Build the HTTP app around a desk: ``desk``, one the caller holds, or ``open_desk``, how to open one.

    * ``desk``: the caller owns its lifecycle (opens it before serving, closes it after; ``lifespan`` may).
    * ``open_desk``: a callable returning an async context manager that yields the open desk (e.g.
      ``functools.partial(open_serving_desk, settings)``). The app opens the desk in its lifespan, in the server's
      own event loop, before ``lifespan`` runs (which finds it open), and closes it after ``lifespan`` ended, when
      the server stops. While the desk is not open (a server that runs no lifespan, or a request after shutdown)
      every endpoint answers 503 ``desk_not_open``, ``/healthz`` included.

    Pass one of the two. The desk is told each request's tenant (``tenant=``); a desk whose methods do not take it
    yet is served without it for one release, with a warning (when the desk is given, or when it opens)."""
    if (desk is None) == (open_desk is None):
        given = "both" if desk is not None else "neither"
        raise ConfigurationError(
            f"create_app takes a desk (desk=) or how to open one (open_desk=), one of them: got {given}"
        )
    metrics = metrics or ServerMetrics()
    keys, limiter, open_requests = KeyRing(settings.server_keys), limiter_for(settings), OpenRequests()

    def serve(opened: SupportDesk) -> Services:
        return Services(
            desk=opened,
            settings=settings,
            metrics=metrics,
            locks=SessionLocks(opened),
            keys=keys,
            limiter=limiter,
            open_requests=open_requests,
            tenanted=_takes_tenant(opened),
        )

    if open_desk is not None:
        lifespan = opening_lifespan(open_desk, serve, lifespan)
    app = FastAPI(title="routegate support desk", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.services = serve(desk) if desk is not None else None  # an opened desk's: see _lifespan
    install_error_handlers(app)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        services = services_of(request.app)
        if services is not None and not await desk_healthy(services):
            return error_response(
                503,
                DATABASE_UNAVAILABLE,
                "the database is unavailable right now; try again shortly",
                {"Retry-After": "5"},
            )
        return error_response(500, "internal_error", "internal server error; the details are in the server log")

    app.add_exception_handler(Exception, on_unexpected)
    app.include_router(_chat.public)
    app.include_router(_chat.protected)
    app.include_router(_openai.router)
    app.include_router(_plan.router)

    # Outermost last: metrics see every request (413s included); CORS headers go on every answer; the shutdown
    # guard is innermost, so its answers pass through all the others.
    app.add_middleware(ShutdownGuard, requests=open_requests)
    app.add_middleware(BodyGuard, max_bytes=settings.server_max_request_bytes)
    if settings.server_cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server_cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "Accept", "X-Session-Id"],
            expose_headers=["X-Session-Id"],
        )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    configure_tracing()  # the SDK and the OTLP exporter, when OTEL_EXPORTER_OTLP_ENDPOINT asks for them
    instrument(app)
    return app


def _takes_tenant(desk: SupportDesk) -> bool:
    """Whether ``desk`` takes ``tenant=``; when it does not, the deprecation warning (pointing at the code that
    gave the desk to :func:`create_app`, or at the lifespan that opened it)."""
    if takes_tenant(desk):
        return True
    warnings.warn(
        f"{type(desk).__name__}.iter/history/reset take no tenant= keyword: the server serves it without telling "
        'it whose request it is. Add `tenant: str = ""` to them (routegate.apps.support.contracts.SupportDesk); '
        "a desk without it is refused in the next release.",
        DeprecationWarning,
        stacklevel=4,
    )
    return False


def end_open_requests(app: FastAPI) -> int:
    """The server is going away with requests still open (a second Ctrl-C cut the wait for them short): each
    event stream ends with its last event (``/chat``: an ``error`` event ``server_shutting_down``), each request
    not answered yet gets 503 ``server_shutting_down``; so does any request that still arrives. Returns how many
    requests were open; their tasks end shortly after. Call it before the desk closes (an app that opened its desk
    itself and has closed it again has none open: 0)."""
    services = services_of(app)
    return services.open_requests.end_all() if services is not None else 0
