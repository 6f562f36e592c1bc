"""How uvicorn serves the app: slow-client and request-head bounds on every connection, one config for every
way to start.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no bound on reading a request: a
client that trickles its header one byte at a time, or never finishes its body, holds a connection (and, for a
body, a request task) as long as it likes. The protocols here add two deadlines per connection:

* **header**: a request's header must be complete within ``server_header_timeout_seconds`` of the connection's
  opening, or of the request's first byte on a kept-alive connection;
* **body**: its body must be complete within ``server_body_timeout_seconds`` of the header.

A connection past its deadline gets ``408 Request Timeout`` (when the request had begun and nothing was answered
yet) and is closed. One timer per connection, armed at the earliest pending deadline and re-armed only when it
fires early, so a request costs two clock reads and rarely a timer.

The same protocols bound each request's head while it arrives (:mod:`routegate.server._limits`): a request line
over ``server_max_request_line_bytes`` is answered ``414``, header fields over ``server_max_header_bytes`` or more
than ``server_max_headers`` of them ``431``, and the connection is closed — before the parser has buffered the
head, before any authentication.

:func:`server_config` builds the :class:`uvicorn.Config` that ``routegate serve`` / ``up`` / ``--workers N`` and
``routegate.server.testing.ServerThread`` use, so no way of starting the server escapes the bounds; Ray Serve's
proxy (``serve --ray``) gets them from :func:`bounded_protocol` (see :mod:`routegate.server.ray_proxy`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import h11

from routegate._extras import needs

with needs("server"):
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

from routegate.server._limits import (
    HeadLimits,
    HeadScanner,
    Refusal,
    headers_too_large,
    too_many_headers,
    uri_too_long,
)
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


@dataclass(frozen=True)
class ConnectionBounds:
    """What one connection may take: the request head's limits and the header and body deadlines (seconds)."""

    head: HeadLimits = field(default_factory=HeadLimits)
    header_timeout: float = 10.0
    body_timeout: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionBounds:
        return cls(
            head=HeadLimits(
                request_line=settings.server_max_request_line_bytes,
                header_bytes=settings.server_max_header_bytes,
                headers=settings.server_max_headers,
            ),
            header_timeout=settings.server_header_timeout_seconds,
            body_timeout=settings.server_body_timeout_seconds,
        )


class ServerConfig(uvicorn.Config):
    """``uvicorn.Config`` plus the connection bounds (pickled whole to ``--workers`` processes)."""

    def __init__(self, app: Any, *, bounds: ConnectionBounds | None = None, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.bounds = bounds or ConnectionBounds()


def server_config(app: Any, settings: Settings, **kwargs: Any) -> ServerConfig:
    """The uvicorn config for ``app`` (an ASGI app or an import string) with the settings' connection bounds."""
    bounds = ConnectionBounds.from_settings(settings)
    options: dict[str, Any] = {
        "timeout_keep_alive": settings.server_keepalive_timeout_seconds,
        "http": guarded_protocol(),
        # h11's own bound on a buffered head, a backstop behind the scan (which refuses first, with 414/431)
        "h11_max_incomplete_event_size": _h11_backstop(bounds.head),
        **kwargs,
    }
    logs = log_config(settings)
    if logs is not None:
        options["log_config"] = logs
    return ServerConfig(app, bounds=bounds, **options)


def _h11_backstop(limits: HeadLimits) -> int:
    return 2 * (limits.request_line + limits.header_bytes)


def _bounds(config: uvicorn.Config, default: ConnectionBounds) -> ConnectionBounds:
    """A :class:`ServerConfig`'s bounds; ``default`` (the protocol class's) for a config without any."""
    bounds = getattr(config, "bounds", None)
    return bounds if isinstance(bounds, ConnectionBounds) else default


class RequestDeadlines:
    """The header/body deadlines of one connection; calls ``expired(phase, timeout)`` when one passes."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        bounds: ConnectionBounds,
        expired: Callable[[Phase, float], None],
    ) -> None:
        self._loop = loop
        self._header = bounds.header_timeout
        self._body = bounds.body_timeout
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


_LINGER_SECONDS = 1.0


class _Guard:
    """What both guarded protocols share: the deadlines and the head scan of a connection, set up when it opens
    and cancelled when it closes, and the answer to a refused request head (:mod:`routegate.server._limits`).

    The parser-specific part (when a head begins, when a body does) stays in each protocol. A refusal's answer
    goes out at once, or, when responses to earlier pipelined requests are still being written, once
    the last of them is complete (reading pauses meanwhile; then the connection closes at once, so that no next
    request starts). Closing a socket with unread bytes resets it, and the reset can reach the client before it
    has read the answer; so an answer sent at once shuts the write side and the connection lingers
    ``_LINGER_SECONDS``, dropping what still arrives, before it closes."""

    default_bounds: ClassVar[ConnectionBounds] = ConnectionBounds()
    config: uvicorn.Config
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    client: Any
    cycle: Any  # the uvicorn protocol's request-response cycle: ``response_complete``
    flow: Any  # the uvicorn protocol's flow control: ``pause_reading()``
    _deadlines: RequestDeadlines
    _scanner: HeadScanner
    _scanning = False  # the next bytes belong to a request head
    _refused = False  # a head was refused: what still arrives is dropped until the connection closes
    _held: Refusal | None = None  # the refusal to answer once the responses being written are complete
    _linger: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]  # the uvicorn protocol's, next in the MRO
        bounds = _bounds(self.config, self.default_bounds)
        self._deadlines = RequestDeadlines(self.loop, bounds, self._timed_out)
        self._deadlines.expect("header")
        self._scanner = HeadScanner(bounds.head)
        self._scanning = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._deadlines.cancel()
        self._stop_lingering()
        super().connection_lost(exc)  # type: ignore[misc]  # the uvicorn protocol's, next in the MRO

    def _timed_out(self, phase: Phase, timeout: float) -> None:
        raise NotImplementedError  # pragma: no cover - each protocol knows whether a request had begun

    def _head_refused(self, data: bytes) -> bool:
        """Scan a read that belongs to a request head; past a limit, refuse it (True: the read is dropped)."""
        if self._scanning and not self._scanner.done:
            refusal = self._scanner.feed(data)
            if refusal is not None:
                self._refuse(refusal)
                return True
        return False

    def _refuse(self, refusal: Refusal) -> None:
        self._deadlines.cancel()
        self._refused = True
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            self._held = refusal
            self.flow.pause_reading()
            return
        log.info("refusing a request from %s: %s %s", self.client, refusal.status, refusal.code)
        self.transport.write(refusal.response())
        if not self.transport.can_write_eof():  # pragma: no cover - TCP transports can
            self.transport.close()
            return
        self.transport.write_eof()
        self._linger = self.loop.call_later(_LINGER_SECONDS, self.transport.close)

    def _answer_held(self) -> None:
        held, cycle = self._held, self.cycle
        if held is None or cycle is None or not cycle.response_complete:
            return
        self._held = None
        if not self.transport.is_closing():
            log.info("refusing a request from %s: %s %s", self.client, held.status, held.code)
            self.transport.write(held.response())
            self.transport.close()

    def _stop_lingering(self) -> None:
        if self._linger is not None:
            self._linger.cancel()


class _HeadRefused(Exception):
    """Raised in an llhttp callback to stop parsing a head past a limit."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is a dependency; h11 is uvicorn's fallback
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with the header and body deadlines and the request head's limits.

    h11 keeps every byte of a head it has not parsed yet in its buffer, so the head being read is always the
    buffer (``trailing_data``) plus the next reads: the scan is exact, also for pipelined requests."""

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_refused(data):
            return
        super().data_received(data)
        self._follow(started=bool(data))

    def on_response_complete(self) -> None:
        self._answer_held()
        super().on_response_complete()
        self._follow(started=False)

    def _follow(self, *, started: bool) -> None:
        if self._refused or self.transport.is_closing():
            return
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
        self._follow_head(state)

    def _follow_head(self, state: object) -> None:
        if state is not h11.IDLE and state is not h11.DONE:
            self._scanning = False  # a body, or the connection is ending
            return
        if self._scanning and not self._scanner.done:
            return  # the same head, still arriving
        self._scanning = True  # a new head: what h11 holds of it so far, then the next reads
        self._scanner.start()
        pending = self.conn.trailing_data[0]
        refusal = self._scanner.feed(pending) if pending else None
        if refusal is not None:
            self._refuse(refusal)

    def _timed_out(self, phase: Phase, timeout: float) -> None:
        begun = phase == "body" or bool(self.conn.trailing_data[0])
        answer = begun and (self.cycle is None or not self.cycle.response_started)
        _close_timed_out(self.transport, self.client, phase, timeout, answer=answer)


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header and body deadlines and the request head's limits.

        llhttp does not say where in a read a message began, so a head that begins inside a read that also held
        the previous request (pipelining) is scanned from the next read on, with the request line and the header
        fields under one budget (:class:`~routegate.server._limits.HeadScanner`, ``aligned=False``): a connection
        still holds at most the limits plus one read. What the scan did not see, llhttp's callbacks count: the
        URL's fragments and each complete header; past a limit they stop the parser, which answers the refusal.
        """

        _begun = False
        _read_starts_head = False  # a message beginning in the current read begins at the read's first byte
        _parsed_refusal: Refusal | None = None  # a limit the callbacks found past: the parser error answers it
        _header_bytes = 0  # of the current head, as parsed

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            self._read_starts_head = self._scanning and self._scanner.is_fresh
            if self._head_refused(data):
                return
            super().data_received(data)
            self._read_starts_head = False
            if self._scanning and self._scanner.done:  # the scan saw the head end, llhttp did not: keep counting
                self._scanner.start(aligned=False)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._header_bytes = 0
            self._begun = True
            if self._deadlines.phase == "idle":
                self._deadlines.expect("header")
            if not self._read_starts_head:  # it began inside this read, after bytes that were not its own
                self._scanner.start(aligned=False)
                self._scanning = True
            self._read_starts_head = False

        def on_url(self, url: bytes) -> None:
            super().on_url(url)
            limit = self._scanner.limits.request_line
            if len(self.url) > limit:
                self._stop_parsing(uri_too_long(limit))

        def on_header(self, name: bytes, value: bytes) -> None:
            super().on_header(name, value)
            limits = self._scanner.limits
            self._header_bytes += len(name) + len(value) + 4  # name: value CRLF
            if self._header_bytes > limits.header_bytes:
                self._stop_parsing(headers_too_large(limits.header_bytes))
            if len(self.headers) > limits.headers:
                self._stop_parsing(too_many_headers(limits.headers))

        def _stop_parsing(self, refusal: Refusal) -> None:
            self._parsed_refusal = refusal
            raise _HeadRefused(refusal.code)  # llhttp stops; uvicorn answers its error with send_400_response

        def send_400_response(self, msg: str) -> None:
            refusal, self._parsed_refusal = self._parsed_refusal, None
            if refusal is None:
                super().send_400_response(msg)
            else:
                self._refuse(refusal)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._scanning = False
            self._deadlines.expect("body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._begun = False
            self._deadlines.idle()
            self._scanner.start()
            self._scanning = True

        def on_response_complete(self) -> None:
            self._answer_held()
            super().on_response_complete()

        def _timed_out(self, phase: Phase, timeout: float) -> None:
            cycle = self.cycle
            answer = self._begun and (phase == "header" or cycle is None or not cycle.response_started)
            _close_timed_out(self.transport, self.client, phase, timeout, answer=answer)


def guarded_protocol() -> type[asyncio.Protocol]:
    """The httptools protocol when httptools is installed (it is a dependency), else the h11 one."""
    if HttpToolsProtocol is not None:
        return GuardedHttpToolsProtocol
    return GuardedH11Protocol  # pragma: no cover


def bounded_protocol(bounds: ConnectionBounds) -> type[asyncio.Protocol]:
    """:func:`guarded_protocol` with ``bounds`` for a server whose ``uvicorn.Config`` we do not build (Ray Serve's
    proxy): a config without bounds of its own gets these."""
    base: Any = guarded_protocol()
    return type(f"Bounded{base.__name__}", (base,), {"default_bounds": bounds})
