"""Faults of an embeddings endpoint (:class:`~routegate.embed.OpenAIEncoder`): one class per kind, each with the
reason a caller can report (``embed_error:<kind>``).

They are :class:`~routegate.errors.RuntimeFaultError` subclasses: an encoder is a part that failed while running,
not a component choosing to end a run. So each caller keeps its own rule for a failed part: the routing agent
stops with ``router_error:<class>`` (``router_error:EmbeddingTimeoutError``), the support desk routes that turn
with its rules alone, ``routegate fit`` / ``eval`` print ``error: <message>`` and exit 1.
"""

from __future__ import annotations

from typing import ClassVar, Final

from routegate.errors import RuntimeFaultError

EMBED_TIMEOUT: Final = "embed_error:timeout"
EMBED_CONNECT: Final = "embed_error:connect"
EMBED_AUTH: Final = "embed_error:auth"
EMBED_RATE_LIMITED: Final = "embed_error:rate_limited"
EMBED_UPSTREAM: Final = "embed_error:upstream"
EMBED_BAD_REQUEST: Final = "embed_error:bad_request"
EMBED_BAD_ANSWER: Final = "embed_error:bad_answer"


class EmbeddingError(RuntimeFaultError):
    """Base of the embeddings endpoint's faults; ``status_code`` is the HTTP status when the endpoint gave one."""

    reason: ClassVar[str] = EMBED_UPSTREAM

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class EmbeddingTimeoutError(EmbeddingError):
    """No answer within the encoder's timeout (or HTTP 408)."""

    reason = EMBED_TIMEOUT


class EmbeddingConnectError(EmbeddingError):
    """The endpoint could not be reached (name resolution, refused connection, TLS)."""

    reason = EMBED_CONNECT


class EmbeddingAuthError(EmbeddingError):
    """HTTP 401 / 403: the key was refused."""

    reason = EMBED_AUTH


class EmbeddingRateLimitedError(EmbeddingError):
    """HTTP 429 after the retries."""

    reason = EMBED_RATE_LIMITED


class EmbeddingUpstreamError(EmbeddingError):
    """HTTP 5xx after the retries."""

    reason = EMBED_UPSTREAM


class EmbeddingBadRequestError(EmbeddingError):
    """Any other HTTP 4xx (an unknown model, an input too long...): retrying will not help."""

    reason = EMBED_BAD_REQUEST


class EmbeddingAnswerError(EmbeddingError):
    """HTTP 200 with an answer that is not the vectors asked for: another number of vectors, another dimension than
    the encoder's, values that are not finite numbers, a zero vector."""

    reason = EMBED_BAD_ANSWER


__all__ = [
    "EMBED_AUTH",
    "EMBED_BAD_ANSWER",
    "EMBED_BAD_REQUEST",
    "EMBED_CONNECT",
    "EMBED_RATE_LIMITED",
    "EMBED_TIMEOUT",
    "EMBED_UPSTREAM",
    "EmbeddingAnswerError",
    "EmbeddingAuthError",
    "EmbeddingBadRequestError",
    "EmbeddingConnectError",
    "EmbeddingError",
    "EmbeddingRateLimitedError",
    "EmbeddingTimeoutError",
    "EmbeddingUpstreamError",
]
