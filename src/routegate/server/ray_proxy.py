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

A turn whose replica died is either wholly in the session's history or not at all: its two messages are written by
one statement, after the answer is complete.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

from routegate._extras import needs
from routegate.server._errors import error_body
from routegate.server._sse import dumps, encode_data, encode_event

log = logging.getLogger(__name__)

PROXY_CALLBACK_ENV: Final = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
PROXY_CALLBACK: Final = "routegate.server.ray_proxy:proxy_middlewares"
REPLICA_UNAVAILABLE: Final = "replica_unavailable"
RETRY_AFTER_SECONDS: Final = 1
MESSAGE: Final = "the replica answering this request stopped; Ray is replacing it: try again"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ReplicaUnavailable:
    """ASGI middleware around Ray Serve's HTTP proxy: a request the proxy could not answer is a clean 503 (or, for
    a stream that had started, a final error event). See the module's description."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
    """Ray Serve's proxy hook (:data:`PROXY_CALLBACK`): the middlewares around its HTTP proxy."""
    with needs("server"):
        from starlette.middleware import Middleware

    return [Middleware(ReplicaUnavailable)]
