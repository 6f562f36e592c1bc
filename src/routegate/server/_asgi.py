"""The one shape of the server's pure ASGI middlewares: act on HTTP requests, pass every other scope through.

The types are starlette's (``starlette.types``), spelled out so that the Ray proxy's middlewares need no
starlette import of their own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HttpMiddleware:
    """Wraps ``app``: an HTTP request goes to :meth:`handle`, any other scope (lifespan, websocket) to ``app``
    unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request, usually by calling ``self.app`` with a wrapped ``send``."""
        raise NotImplementedError  # pragma: no cover - every middleware defines it
