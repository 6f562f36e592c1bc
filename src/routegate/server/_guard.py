"""Request-body guard (pure ASGI): a size limit and a UTF-8 check on JSON bodies, before any parsing.

The body is at most ``max_bytes`` (a few KiB to a few hundred), so it is read whole, checked, and replayed
to the application. Oversized bodies get 413 whether they announce a ``Content-Length`` or arrive chunked.
"""

from __future__ import annotations

import json

from routegate._extras import needs

with needs("server"):
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

from routegate.server._errors import error_body

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BodyGuard:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _reject(send, 400, "invalid_request", "the Content-Length header is not a number")
                return
            if size > self.max_bytes:
                await _too_large(send, size, self.max_bytes)
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                await _too_large(send, total, self.max_bytes, at_least=True)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        content_type = headers.get(b"content-type", b"").decode("latin-1").lower()
        if body and ("json" in content_type or not content_type):
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                await _reject(
                    send,
                    400,
                    "invalid_encoding",
                    f"the request body is not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset {exc.start}); "
                    "send UTF-8 encoded JSON",
                )
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, size: int, limit: int, *, at_least: bool = False) -> None:
    seen = f"at least {size}" if at_least else str(size)
    await _reject(send, 413, "request_too_large", f"the request body is {seen} bytes; the limit is {limit} bytes")


async def _reject(send: Send, status: int, code: str, message: str) -> None:
    payload = json.dumps(error_body(status, code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})
