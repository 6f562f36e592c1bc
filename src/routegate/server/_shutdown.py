"""Ending the requests still open when the server stops for good (pure ASGI).

On Ctrl-C the server stops accepting connections and lets open requests finish; a second Ctrl-C stops waiting.
Without this module the requests still open then would be cancelled mid-flight as the process exits: the client
of an event stream would read a stream that just stops (no ``final``, no ``error``) and the server would print
the ASGI task's ``CancelledError`` traceback. :class:`OpenRequests` keeps the requests in flight;
:meth:`OpenRequests.end_all` ends each with an answer before the desk closes:

* not answered yet: ``503`` with the code ``server_shutting_down`` (and ``Retry-After``);
* an event stream under way: its *farewell*, the last event its endpoint registered with :func:`set_farewell`
  (``/chat``: an ``error`` event ``server_shutting_down``; ``/v1/chat/completions``: an error chunk and
  ``[DONE]``), then the end of the response.

:class:`ShutdownGuard` is the innermost middleware, so the outer ones (metrics, CORS) see an ordinary answer.
It costs a request no task: it holds the request's own task and cancels it only when the server is going away.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Final

from routegate.server._asgi import ASGIApp, HttpMiddleware, Message, Receive, Scope, Send
from routegate.server._errors import error_body

SERVER_SHUTTING_DOWN: Final = "server_shutting_down"
SHUTTING_DOWN_MESSAGE: Final = "the server is shutting down; send the request again once it is back"
_SCOPE_KEY: Final = "routegate.open_request"


@dataclass(eq=False, slots=True)
class _Open:
    task: asyncio.Task[Any]
    started: bool = False
    finished: bool = False
    farewell: bytes | None = None
    cut: bool = False


def set_farewell(scope: Scope, data: bytes) -> None:
    """What the response of ``scope`` (an event stream) sends as its last bytes if the server stops under it."""
    request = scope.get(_SCOPE_KEY)
    if isinstance(request, _Open):
        request.farewell = data


class OpenRequests:
    """The requests in flight in one app."""

    def __init__(self) -> None:
        self._open: set[_Open] = set()
        self.closing = False

    def __len__(self) -> int:
        return len(self._open)

    def end_all(self) -> int:
        """End every open request with an answer (see the module's text); new ones get 503. Returns how many
        were ended. Their tasks finish on their own shortly after (the caller may wait for them)."""
        self.closing = True
        ended = 0
        for request in list(self._open):
            if not request.cut and not request.finished:
                request.cut = True
                request.task.cancel()
                ended += 1
        return ended


class ShutdownGuard(HttpMiddleware):
    def __init__(self, app: ASGIApp, *, requests: OpenRequests) -> None:
        super().__init__(app)
        self.requests = requests

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a request is always served by a task
            await self.app(scope, receive, send)
            return
        if self.requests.closing:
            await _refuse(send)
            return
        request = _Open(task)

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                request.started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                request.finished = True
            await send(message)

        scope[_SCOPE_KEY] = request
        self.requests._open.add(request)
        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not request.cut:
                raise
            task.uncancel()  # ours: answer instead of ending as a cancelled task
            if not request.started:
                await _refuse(send)
            elif not request.finished:
                await send({"type": "http.response.body", "body": request.farewell or b"", "more_body": False})
        finally:
            self.requests._open.discard(request)


async def _refuse(send: Send) -> None:
    body = json.dumps(error_body(503, SERVER_SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"5"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
