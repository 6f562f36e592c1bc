"""How uvicorn serves the app: slow-client bounds on every connection, one config for every way to start.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no bound on reading a request: a
client that trickles its header one byte at a time, or never finishes its body, holds a connection (and, for a
body, a request task) as long as it likes. The protocols here add two deadlines per connection:

* **header**: a request's header must be complete within ``server_header_timeout_seconds`` of the connection's
  opening, or of the request's first byte on a kept-alive connection;
* **body**: its body must be complete within ``server_body_timeout_seconds`` of the header.

A connection past its deadline gets ``408 Request Timeout`` (when the request had begun and nothing was answered
yet) and is closed. One timer per connection, armed at the earliest pending deadline and re-armed only when it
fires early, so a request costs two clock reads and rarely a timer.

:func:`server_config` builds the :class:`uvicorn.Config` that ``routegate serve`` / ``up`` / ``--workers N`` and
``routegate.server.testing.ServerThread`` use, so no way of starting the server escapes the bounds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Literal

import h11

from routegate._extras import needs

with needs("server"):
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

from routegate.server._logs import log_config
from routegate.settings import Settings

log = logging.getLogger(__name__)

Phase = Literal["header", "body", "idle"]
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)
_TIMEOUT_BODY = (
    b'{"error":{"type":"timeout_error","code":"request_timeout","message":"the request %s did not arrive within %g s"}}'
)


class ServerConfig(uvicorn.Config):
    """``uvicorn.Config`` plus the two request deadlines (pickled whole to ``--workers`` processes)."""

    def __init__(self, app: Any, *, header_timeout: float = 10.0, body_timeout: float = 30.0, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout


def server_config(app: Any, settings: Settings, **kwargs: Any) -> ServerConfig:
    """The uvicorn config for ``app`` (an ASGI app or an import string) with the settings' connection bounds."""
    options: dict[str, Any] = {
        "timeout_keep_alive": settings.server_keepalive_timeout_seconds,
        "http": guarded_protocol(),
        **kwargs,
    }
    logs = log_config(settings)
    if logs is not None:
        options["log_config"] = logs
    return ServerConfig(
        app,
        header_timeout=settings.server_header_timeout_seconds,
        body_timeout=settings.server_body_timeout_seconds,
        **options,
    )


class RequestDeadlines:
    """The header/body deadlines of one connection; calls ``expired(phase, timeout)`` when one passes."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        config: uvicorn.Config,
        expired: Callable[[Phase, float], None],
    ) -> None:
        self._loop = loop
        self._header = float(getattr(config, "header_timeout", 10.0))
        self._body = float(getattr(config, "body_timeout", 30.0))
        self._expired = expired
        self.phase: Phase = "idle"
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def expect(self, phase: Literal["header", "body"]) -> None:
        self.phase = phase
        self._deadline = self._loop.time() + (self._header if phase == "header" else self._body)
        timer = self._timer
        if timer is not None and timer.when() <= self._deadline:
            return  # fires first; it re-arms itself for the new deadline
        if timer is not None:
            timer.cancel()
        self._timer = self._loop.call_at(self._deadline, self._fire)

    def idle(self) -> None:
        self.phase = "idle"  # the armed timer, if any, finds nothing to do

    def cancel(self) -> None:
        self.phase = "idle"
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        if self.phase == "idle":
            return
        if self._loop.time() < self._deadline:
            self._timer = self._loop.call_at(self._deadline, self._fire)
            return
        phase = self.phase
        self.phase = "idle"
        self._expired(phase, self._header if phase == "header" else self._body)


def _close_timed_out(
    transport: asyncio.Transport, client: object, phase: Phase, timeout: float, *, answer: bool
) -> None:
    if transport.is_closing():
        return
    log.info("closing connection %s: the request %s did not arrive within %g s", client, phase, timeout)
    if answer:
        body = _TIMEOUT_BODY % (phase.encode(), timeout)
        transport.write(_TIMEOUT_RESPONSE % (len(body), body))
    transport.close()


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is a dependency; h11 is uvicorn's fallback
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the header and body deadlines."""

    _deadlines: RequestDeadlines

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadlines = RequestDeadlines(self.loop, self.config, self._timed_out)
        self._deadlines.expect("header")

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadlines.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow(started=bool(data))

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow(started=False)

    def _follow(self, *, started: bool) -> None:
        state = self.conn.their_state
        deadlines = self._deadlines
        if state is h11.IDLE:
            if deadlines.phase == "idle" and (started or self.conn.trailing_data[0]):
                deadlines.expect("header")
        elif state is h11.SEND_BODY:
            if deadlines.phase != "body":
                deadlines.expect("body")
        else:
            deadlines.idle()

    def _timed_out(self, phase: Phase, timeout: float) -> None:
        begun = phase == "body" or bool(self.conn.trailing_data[0])
        answer = begun and (self.cycle is None or not self.cycle.response_started)
        _close_timed_out(self.transport, self.client, phase, timeout, answer=answer)


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol with the header and body deadlines."""

        _deadlines: RequestDeadlines
        _begun = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadlines = RequestDeadlines(self.loop, self.config, self._timed_out)
            self._deadlines.expect("header")

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadlines.cancel()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._begun = True
            if self._deadlines.phase == "idle":
                self._deadlines.expect("header")

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._deadlines.expect("body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._begun = False
            self._deadlines.idle()

        def _timed_out(self, phase: Phase, timeout: float) -> None:
            cycle = self.cycle
            answer = self._begun and (phase == "header" or cycle is None or not cycle.response_started)
            _close_timed_out(self.transport, self.client, phase, timeout, answer=answer)


def guarded_protocol() -> type[asyncio.Protocol]:
    """The httptools protocol when httptools is installed (it is a dependency), else the h11 one."""
    if HttpToolsProtocol is not None:
        return GuardedHttpToolsProtocol
    return GuardedH11Protocol  # pragma: no cover
