"""An :class:`~routegate.embed.protocol.Encoder` over any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI,
vLLM, Ollama, llama.cpp's server, LiteLLM, text-embeddings-inference...) through the official ``openai`` SDK.

* Batching: texts go ``batch_size`` to a request (``ROUTEGATE_EMBEDDINGS_BATCH_SIZE``), in order.
* Time: ``timeout`` bounds each request (``ROUTEGATE_EMBEDDINGS_TIMEOUT_SECONDS``); the SDK retries timeouts,
  429 and 5xx ``max_retries`` times with backoff.
* Every answer is checked before it is used: one vector per text (by ``index``), all of the encoder's dimension
  (``dimensions`` when given, else the first answer's), finite, not zero; rows are L2-normalised (not every
  server normalises). Anything else, and every endpoint failure, is an :class:`~routegate.embed.errors.EmbeddingError`
  naming the endpoint, the model and what was wrong.

``name`` is ``"openai"`` and ``model_id`` the model's name: a router fitted with this encoder records both with the
dimension, and loading it needs an encoder of the same model and dimension (:mod:`routegate.routers.persist`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
import openai

from routegate._extras import needs
from routegate._openai_failures import check_base_url, failure_detail, failure_kind

with needs("embed"):
    import numpy as np

from routegate.embed.errors import (
    EmbeddingAnswerError,
    EmbeddingAuthError,
    EmbeddingBadRequestError,
    EmbeddingConnectError,
    EmbeddingError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
    EmbeddingUpstreamError,
)
from routegate.embed.protocol import Vectors
from routegate.errors import ConfigurationError

if TYPE_CHECKING:
    from routegate.settings import Settings

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
NAME = "openai"
_PROBE = "dimension probe"


def _positive(value: object, what: str, *, integer: bool) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"OpenAIEncoder.{what} must be a {'whole ' if integer else ''}number > 0, got {value!r}"
        )


class OpenAIEncoder:
    """Embeddings of ``model`` at ``base_url`` (default OpenAI's). ``dimensions``: the vectors' dimension, checked
    on every answer (``None``: learnt from the first answer; reading :attr:`dim` before any answer asks the
    endpoint once); ``request_dimensions``: also send it as the request's ``dimensions`` parameter (models that can
    shorten their vectors, such as OpenAI's ``text-embedding-3-*``; other servers may refuse it)."""

    name = NAME

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        dimensions: int | None = None,
        request_dimensions: bool = False,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"OpenAIEncoder needs a model name (ROUTEGATE_EMBEDDINGS_MODEL), got {model!r}")
        if not isinstance(api_key, str) or not api_key.strip():
            raise ConfigurationError(
                "OpenAIEncoder needs an API key (ROUTEGATE_EMBEDDINGS_API_KEY or OPENAI_API_KEY); local servers that "
                "do not check it accept any placeholder such as 'local'"
            )
        if dimensions is not None:
            _positive(dimensions, "dimensions", integer=True)
        if request_dimensions and dimensions is None:
            raise ConfigurationError("OpenAIEncoder(request_dimensions=True) needs dimensions: the one to ask for")
        _positive(batch_size, "batch_size", integer=True)
        _positive(timeout, "timeout", integer=False)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"OpenAIEncoder.max_retries must be an integer >= 0, got {max_retries!r}")
        self.model = model.strip()
        self.base_url = check_base_url(base_url, name="ROUTEGATE_EMBEDDINGS_BASE_URL") if base_url else OPENAI_BASE_URL
        self.request_dimensions = request_dimensions
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._dim = dimensions
        options: dict[str, Any] = {
            "api_key": api_key,
            "base_url": self.base_url,
            "timeout": self.timeout,
            "max_retries": max_retries,
        }
        self._client = openai.OpenAI(**options, http_client=http_client)
        self._async_client = openai.AsyncOpenAI(**options, http_client=async_http_client)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIEncoder:
        """The encoder of ``ROUTEGATE_EMBEDDINGS_MODEL`` at ``ROUTEGATE_EMBEDDINGS_BASE_URL`` (default
        ``OPENAI_BASE_URL``, then OpenAI) with ``ROUTEGATE_EMBEDDINGS_API_KEY`` (default ``OPENAI_API_KEY``),
        ``_BATCH_SIZE``, ``_TIMEOUT_SECONDS`` and ``_DIMENSIONS``."""
        if not settings.embeddings_model:
            raise ConfigurationError(
                "no embeddings model is configured: set ROUTEGATE_EMBEDDINGS_MODEL (and ROUTEGATE_EMBEDDINGS_BASE_URL "
                "for a server other than OpenAI)"
            )
        key = settings.embeddings_api_key or settings.openai_api_key
        return cls(
            model=settings.embeddings_model,
            api_key=key.get_secret_value() if key is not None else "",
            base_url=settings.embeddings_base_url or settings.openai_base_url or None,
            dimensions=settings.embeddings_dimensions,
            batch_size=settings.embeddings_batch_size,
            timeout=settings.embeddings_timeout_seconds,
            max_retries=settings.openai_max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAIEncoder(model={self.model!r}, base_url={self.base_url!r}, dimensions={self._dim!r})"

    @property
    def model_id(self) -> str:
        return self.model

    @property
    def dim(self) -> int:
        """The vectors' dimension (asks the endpoint once when it was not given and nothing was embedded yet)."""
        if self._dim is None:
            self.encode([_PROBE])
        assert self._dim is not None  # set by the first answer
        return self._dim

    # -- embedding ---------------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts``: shape ``(len(texts), dim)``, float32, rows of unit length."""
        batches = self._batches(texts)
        if not batches:
            return self._empty()
        return np.concatenate([self._create(batch) for batch in batches])

    async def aencode(self, texts: Sequence[str]) -> Vectors:
        """``encode`` from a coroutine (the SDK's async client: the event loop is not blocked)."""
        batches = self._batches(texts)
        if not batches:
            return self._empty()
        return np.concatenate([await self._acreate(batch) for batch in batches])

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        self._client.close()
        await self._async_client.close()

    def _empty(self) -> Vectors:
        return np.zeros((0, self._dim or 0), dtype=np.float32)

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        items = [str(t) for t in texts]
        return [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]

    def _params(self, batch: list[str]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.request_dimensions:
            params["dimensions"] = self._dim
        return params

    def _create(self, batch: list[str]) -> Vectors:
        try:
            answer = self._client.embeddings.create(**self._params(batch))
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise self._failed(exc) from exc
        return self._vectors(answer, len(batch))

    async def _acreate(self, batch: list[str]) -> Vectors:
        try:
            async with asyncio.timeout(self.timeout * (self.max_retries + 1)):
                answer = await self._async_client.embeddings.create(**self._params(batch))
        except (openai.OpenAIError, httpx.HTTPError, TimeoutError) as exc:
            raise self._failed(exc) from exc
        return self._vectors(answer, len(batch))

    # -- checks --------------------------------------------------------------------------------------------------
    def _vectors(self, answer: object, count: int) -> Vectors:
        where = f"embeddings endpoint {self.base_url} (model {self.model!r})"
        data = getattr(answer, "data", None)
        if not isinstance(data, list) or len(data) != count:
            got = len(data) if isinstance(data, list) else type(data).__name__
            raise EmbeddingAnswerError(f"{where} answered {got} vectors for {count} texts")
        rows: list[object] = [None] * count
        for item in data:
            index = getattr(item, "index", None)
            if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
                raise EmbeddingAnswerError(f"{where} answered a vector with index {index!r} for {count} texts")
            rows[index] = getattr(item, "embedding", None)
        try:
            matrix = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise EmbeddingAnswerError(f"{where} answered vectors that are not lists of numbers of one length") from exc
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbeddingAnswerError(f"{where} answered vectors of shape {matrix.shape}, not one row per text")
        expected = self._dim
        if expected is not None and matrix.shape[1] != expected:
            raise EmbeddingAnswerError(
                f"{where} answered {matrix.shape[1]}-dim vectors; this encoder's are {expected}-dim (check "
                "ROUTEGATE_EMBEDDINGS_DIMENSIONS and that the model is the one the router was fitted with)"
            )
        if not np.isfinite(matrix).all():
            raise EmbeddingAnswerError(f"{where} answered vectors with values that are not finite numbers")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if (norms == 0).any():
            raise EmbeddingAnswerError(f"{where} answered a zero vector")
        self._dim = matrix.shape[1]
        out: Vectors = (matrix / norms).astype(np.float32)
        return out

    def _failed(self, exc: BaseException) -> EmbeddingError:
        where = f"embeddings endpoint {self.base_url} (model {self.model!r})"
        kind = failure_kind(exc)
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        detail = failure_detail(exc)
        error: EmbeddingError
        if kind == "timeout":
            error = EmbeddingTimeoutError(
                f"{where} did not answer within {self.timeout:g}s (ROUTEGATE_EMBEDDINGS_TIMEOUT_SECONDS)",
                status_code=status,
            )
        elif kind == "connect":
            error = EmbeddingConnectError(
                f"{where} could not be reached: {detail} (check ROUTEGATE_EMBEDDINGS_BASE_URL and that it is up)"
            )
        elif kind == "auth":
            error = EmbeddingAuthError(f"{where} refused the key (HTTP {status}): {detail}", status_code=status)
        elif kind == "rate_limited":
            error = EmbeddingRateLimitedError(
                f"{where} answered HTTP 429 after {self.max_retries} retries: {detail}", status_code=status
            )
        elif kind == "bad_request":
            error = EmbeddingBadRequestError(
                f"{where} refused the request (HTTP {status}): {detail}", status_code=status
            )
        else:
            error = EmbeddingUpstreamError(
                f"{where} failed ({status or type(exc).__name__}): {detail}", status_code=status
            )
        logger.debug("embeddings failure %s (%s)", error.reason, type(exc).__name__)
        return error
