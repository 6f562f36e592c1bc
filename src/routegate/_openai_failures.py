"""What went wrong with a call through the ``openai`` SDK, for the clients built on it (the chat model in
:mod:`routegate.llm`, the embeddings encoder in :mod:`routegate.embed`): one classification, each client words its
own stop signal or error from it. Also the check of an endpoint's base URL both share."""

from __future__ import annotations

from typing import Final, Literal
from urllib.parse import urlsplit

import httpx
import openai

from routegate.errors import ConfigurationError

FailureKind = Literal["timeout", "connect", "auth", "rate_limited", "upstream", "bad_request"]
_MAX_DETAIL: Final = 300


def check_base_url(url: str, *, name: str = "OPENAI_BASE_URL") -> str:
    """``url`` without trailing ``/`` if it is an ``http(s)://host[:port][/path]`` URL, else
    :class:`ConfigurationError` naming ``name`` (the setting it came from) and the value seen."""
    text = url.strip() if isinstance(url, str) else ""
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ConfigurationError(
            f"{name} must be an http:// or https:// URL with a host (like https://api.openai.com/v1 or "
            f"http://localhost:11434/v1), got {str(url)[:200]!r}; fix it or unset it to use OpenAI"
        )
    return text.rstrip("/")


def failure_detail(exc: BaseException) -> str:
    """The endpoint's own message when it gave one (its error body's ``message``), else the exception's text; one
    line, at most 300 characters."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    text = message if isinstance(message, str) and message else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def failure_kind(exc: BaseException) -> FailureKind:
    """The kind of one SDK / transport failure: no answer in time (or HTTP 408), unreachable, credentials refused
    (401 / 403), rate limited (429), the endpoint failing (5xx, or an answer that is not what the API defines), or
    the request refused (any other 4xx)."""
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        return "connect"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in (401, 403):
            return "auth"
        if status == 429:
            return "rate_limited"
        if status == 408:
            return "timeout"
        if 400 <= status < 500:
            return "bad_request"
    return "upstream"
