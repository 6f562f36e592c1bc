"""What Ray Serve's HTTP proxy answers when no replica can: a 503 in the server's own error shape, never a bare 500.

When a replica dies with requests in flight (killed, out of memory, its node gone), Ray Serve's proxy ends each of
those requests with a bare ``500 Internal Server Error`` and no body, and cuts off a streamed answer that had
started. Ray replaces the replica; the client should simply try again. :class:`ReplicaUnavailable` wraps the
proxy and says so:

* no response had started → ``503`` with ``Retry-After: 1`` and the server's error body
  ``{"error": {"type": "service_unavailable", "code": "replica_unavailable", "message": ...}}``;
* an event stream had started → it ends with the stream's own error event (``event: error`` with
  ``{"code": "replica_unavailable", ...}`` on ``/chat``; an error chunk on ``/v1/chat/completions``) and closes
  cleanly, the way a turn that fails mid-stream ends;
* everything a replica answers (its own 4xx/5xx included) passes through unchanged.

Ray Serve installs it through its proxy hook: the environment variable :data:`PROXY_CALLBACK_ENV` set to
:data:`PROXY_CALLBACK` in the proxy's process. ``routegate serve --ray`` sets it for the Serve instance it starts;
on a cluster whose Serve is already running, set it on the nodes (``ray start``) yourself.

The same hook bounds the proxy's connections the way ``routegate serve`` bounds its own
(:mod:`routegate.server.serving`): the request head's limits, the header and body deadlines (408), and the body
size (413), from the ``ROUTEGATE_SERVER_*`` settings of the proxy's environment. Ray Serve's ``HTTPOptions`` pass
no protocol to the ``uvicorn.Config`` of its proxy (it asks for uvicorn's ``"auto"`` protocol), and the hook runs
in the proxy's process before that config is loaded; so :func:`bound_proxy_connections` points uvicorn's
``"auto"`` protocol, in that process only, at routegate's guarded one. :func:`proxy_middlewares` checks that it
took (a Ray Serve that names its protocol itself would escape it: then the proxy does not start, and says why).

A turn whose replica died is either wholly in the session's history or not at all: its two messages are written by
one statement, after the answer is complete.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from routegate._extras import needs
from routegate.server._asgi import HttpMiddleware, Message, Receive, Scope, Send
from routegate.server._errors import error_body
from routegate.server._sse import dumps, encode_data, encode_event
from routegate.settings import Settings

log = logging.getLogger(__name__)

PROXY_CALLBACK_ENV: Final = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
PROXY_CALLBACK: Final = "routegate.server.ray_proxy:proxy_middlewares"
REPLICA_UNAVAILABLE: Final = "replica_unavailable"
RETRY_AFTER_SECONDS: Final = 1
MESSAGE: Final = "the replica answering this request stopped; Ray is replacing it: try again"


class ReplicaUnavailable(HttpMiddleware):
    """ASGI middleware around Ray Serve's HTTP proxy: a request the proxy could not answer is a clean 503 (or, for
    a stream that had started, a final error event). See the module's description."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = finished = False
        event_stream = False

        async def watch(message: Message) -> None:
            nonlocal started, finished, event_stream
            if message["type"] == "http.response.start":
                started = True
                event_stream = any(
                    name.lower() == b"content-type" and value.startswith(b"text/event-stream")
                    for name, value in message.get("headers", [])
                )
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # the proxy failed outright: the same answer as for a replica that died
            if finished:
                raise
            log.warning("Ray Serve's proxy failed on %s: %s", scope.get("path", "?"), type(exc).__name__)
        if finished:
            return
        if not started:
            await _send_unavailable(send)
        elif event_stream:
            await send({"type": "http.response.body", "body": _stream_error(scope["path"]), "more_body": False})
        # any other response cut off after it started cannot be mended: the connection closes mid-body


def _stream_error(path: str) -> bytes:
    if path.startswith("/v1/"):
        return encode_data(dumps(error_body(503, REPLICA_UNAVAILABLE, MESSAGE)))
    return encode_event("error", {"code": REPLICA_UNAVAILABLE, "message": MESSAGE})


async def _send_unavailable(send: Send) -> None:
    body = dumps(error_body(503, REPLICA_UNAVAILABLE, MESSAGE)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def proxy_middlewares() -> list[Any]:
    """Ray Serve's proxy hook (:data:`PROXY_CALLBACK`): the middlewares around its HTTP proxy (a replica that
    died is a 503; a body over ``server_max_request_bytes`` a 413), after bounding the proxy's connections."""
    with needs("server"):
        from starlette.middleware import Middleware

    from routegate.server._guard import BodyGuard

    settings = Settings()  # the proxy's process: its ROUTEGATE_* environment is the driver's (or the node's)
    bound_proxy_connections(settings)
    return [Middleware(ReplicaUnavailable), Middleware(BodyGuard, max_bytes=settings.server_max_request_bytes)]


def bound_proxy_connections(settings: Settings) -> None:
    """Make uvicorn's ``"auto"`` HTTP protocol, in this process, the guarded one with ``settings``' bounds."""
    import inspect

    with needs("server"):
        import uvicorn.config

    from routegate.server.serving import ConnectionBounds, bounded_protocol

    protocol = bounded_protocol(ConnectionBounds.from_settings(settings))
    protocols: dict[str, Any] = uvicorn.config.HTTP_PROTOCOLS  # uvicorn resolves a non-string entry as given
    protocols["auto"] = protocol
    loaded = inspect.signature(uvicorn.config.Config).parameters["http"].default  # what Ray Serve's config asks for
    if protocols.get(loaded) is not protocol:
        raise RuntimeError(
            f"uvicorn's default HTTP protocol is {loaded!r}, not 'auto': routegate cannot bound Ray Serve's proxy "
            "connections in this uvicorn version; pin uvicorn to the version in routegate's requirements"
        )
    log.info("Ray Serve's proxy connections are bounded as routegate serve's are")
