"""Test doubles for a model endpoint that is away: a transport that counts the connection attempts reaching it,
and a loopback port nothing listens on. Used to show that a client whose circuit breaker is open makes no attempt
at all (counted, not timed)."""

from __future__ import annotations

import socket

import httpx


class CountingTransport(httpx.AsyncBaseTransport):
    """The real transport, counting the requests that reach it (each one is a connection attempt here)."""

    def __init__(self) -> None:
        self.attempts = 0
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


__all__ = ["CountingTransport", "closed_port"]
