"""Bounds on a request's head (request line, header fields), checked on the bytes as they arrive.

Neither of uvicorn's HTTP parsers bounds a request head the way a public server must: httptools (llhttp) has no
limit at all and keeps a header's value in memory until the value ends, and h11 answers an over-long head with a
bare ``400``. :class:`HeadScanner` follows a head through the connection's reads *before* they reach the parser,
so an over-long head is refused while it arrives, after at most one read past the limit, never buffered whole:

* a request line longer than ``request_line`` bytes → ``414 URI Too Long``;
* header fields (the lines after the request line) larger than ``header_bytes`` in total, or more than
  ``headers`` of them → ``431 Request Header Fields Too Large``.

A scan costs one ``bytes.find`` per line of the head; the body is never looked at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, NamedTuple

from routegate.server._errors import error_body

_CR: Final = 0x0D


@dataclass(frozen=True)
class HeadLimits:
    """The bounds on one request head (the settings ``server_max_request_line_bytes``,
    ``server_max_header_bytes`` and ``server_max_headers``)."""

    request_line: int = 8 * 1024
    header_bytes: int = 16 * 1024
    headers: int = 100


class Refusal(NamedTuple):
    """Why a head is refused: the status, the error code and a message naming the limit."""

    status: int
    code: str
    message: str

    def response(self) -> bytes:
        """The whole HTTP/1.1 response (JSON error body, ``connection: close``)."""
        body = json.dumps(error_body(self.status, self.code, self.message)).encode()
        reason = _REASONS.get(self.status, "Bad Request")
        return (
            f"HTTP/1.1 {self.status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body


_REASONS: Final = {414: "URI Too Long", 431: "Request Header Fields Too Large"}


class HeadScanner:
    """Follows one request head at a time through the bytes of a connection.

    Call :meth:`start` when a new head begins (the connection opened, or the previous request ended), then
    :meth:`feed` each read while :attr:`done` is false. ``start(aligned=False)`` says the head began somewhere
    inside a read that was not scanned (a pipelined request): its first line may then be a header line, so the
    request line and the header fields share one budget and no 414 is given.
    """

    def __init__(self, limits: HeadLimits) -> None:
        self.limits = limits
        self.start()

    def start(self, *, aligned: bool = True) -> None:
        self.done = False
        self.is_fresh = True  # no byte of this head seen yet
        self._in_request_line = aligned
        self._request_line = 0  # bytes of the request line so far (blank lines before it included)
        self._header_bytes = 0  # bytes of the header fields so far
        self._headers = 0  # complete header lines so far
        self._line = 0  # bytes of the current line before its LF
        self._last = 0  # the last byte of the current line seen so far
        limits = self.limits
        self._header_budget = limits.header_bytes if aligned else limits.header_bytes + limits.request_line
        self._header_count = limits.headers if aligned else limits.headers + 1

    def feed(self, data: bytes) -> Refusal | None:
        """Scan the next bytes of the head; the reason to refuse it, or ``None``. Sets :attr:`done` at the blank
        line that ends the head (the bytes after it are the body or the next request, not looked at)."""
        pos, size = 0, len(data)
        self.is_fresh = self.is_fresh and not size
        while pos < size and not self.done:
            newline = data.find(b"\n", pos)
            end = size if newline < 0 else newline
            if end > pos:
                self._line += end - pos
                self._last = data[end - 1]
            taken = end - pos + (newline >= 0)
            if self._in_request_line:
                self._request_line += taken
                if self._request_line > self.limits.request_line:
                    return uri_too_long(self.limits.request_line)
            else:
                self._header_bytes += taken
                if self._header_bytes > self._header_budget:
                    return headers_too_large(self._header_budget)
            if newline < 0:
                return None
            self._end_line()
            if self._headers > self._header_count:
                return too_many_headers(self._header_count)
            pos = newline + 1
        return None

    def _end_line(self) -> None:
        blank = self._line == 0 or (self._line == 1 and self._last == _CR)
        self._line = 0
        if self._in_request_line:
            self._in_request_line = blank  # blank lines before the request line are tolerated (and counted)
        elif blank:
            self.done = True
        else:
            self._headers += 1


def uri_too_long(limit: int) -> Refusal:
    return Refusal(
        414,
        "uri_too_long",
        f"the request line is longer than {limit} bytes (ROUTEGATE_SERVER_MAX_REQUEST_LINE_BYTES); "
        "send a shorter URL, with the data in the body",
    )


def headers_too_large(limit: int) -> Refusal:
    return Refusal(
        431,
        "headers_too_large",
        f"the request's header fields are larger than {limit} bytes (ROUTEGATE_SERVER_MAX_HEADER_BYTES); "
        "send fewer or shorter headers",
    )


def too_many_headers(limit: int) -> Refusal:
    return Refusal(
        431,
        "too_many_headers",
        f"the request has more than {limit} header fields (ROUTEGATE_SERVER_MAX_HEADERS); send fewer headers",
    )
