"""A :class:`~routegate.llm.protocol.ChatModel` over the official ``openai`` SDK, for any OpenAI-compatible
endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM…).

Every failure leaves as an :class:`~routegate.llm.errors.LLMError` stop signal, never as an SDK exception:

=========================================  ==========================
what happened                              stop reason
=========================================  ==========================
no answer in time, HTTP 408               ``llm_timeout``
endpoint unreachable (DNS, refused, TLS)   ``llm_error:connect``
HTTP 401 / 403                             ``llm_error:auth``
HTTP 429 (after the retries)               ``llm_error:rate_limited``
HTTP 5xx (after the retries), bad answer   ``llm_error:upstream``
an answer over ``max_response_bytes``      ``llm_error:upstream``
any other HTTP 4xx                         ``llm_error:bad_request``
=========================================  ==========================

``base_url`` (``OPENAI_BASE_URL``) is checked when the model is built: an ``http://`` or ``https://`` URL with a
host, else :class:`~routegate.errors.ConfigurationError` naming the variable, so bad configuration fails at
start-up instead of as a failed turn.

Retries are the SDK's: exponential backoff with jitter (honouring ``Retry-After``) for timeouts, 408, 409, 429
and 5xx, at most ``max_retries`` times. An endpoint that cannot be reached at all (refused connection, DNS) or
that refuses the credentials is not retried: the call fails at once. ``timeout`` bounds each attempt *and* the
whole call, retries included, so a call never takes longer than ``timeout`` seconds before it answers or stops
with ``llm_timeout`` (for :meth:`OpenAIChatModel.stream`: until the first chunk, and then between two chunks).

Each model has a circuit breaker (:mod:`routegate.llm._breaker`, ``breaker_seconds``:
``ROUTEGATE_LLM_BREAKER_SECONDS``): after a failure that says the endpoint is away (connect, timeout, auth, 429
or 5xx after the retries), every call fails at once with the same stop reason, without a connection attempt,
until the window has passed; then one trial call goes through. :attr:`OpenAIChatModel.health` is ``ok``,
``degraded`` or ``down``; :meth:`OpenAIChatModel.probe` checks the endpoint once (what ``serve`` / ``up`` do at
start).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import httpx
import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionUserMessageParam,
)
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from routegate._closing import ClosedOnExit
from routegate._openai_failures import check_base_url, failure_detail, failure_kind
from routegate.core.telemetry import span, tracer
from routegate.errors import ConfigurationError
from routegate.llm._breaker import CircuitBreaker
from routegate.llm._genai import GenAI, record_completion, record_llm_error
from routegate.llm._replies import names_the_feature, refuses_mode, reply_of, schema_param, tool_params
from routegate.llm.errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMConnectError,
    LLMError,
    LLMModeRefusedError,
    LLMRateLimitedError,
    LLMTimeoutError,
    LLMUpstreamError,
)
from routegate.llm.protocol import ChatMessage, ModelHealth
from routegate.llm.structured import ModelReply, OutputFormat, OutputMode, ToolsFormat
from routegate.settings import Settings

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_BREAKER_SECONDS = 30.0


MAX_RESPONSE_BYTES: Final = 32 * 1024 * 1024
"""What the client reads of one answer of the endpoint at most (a completion's body, or a whole stream): past it the
answer is not read further and the call fails with ``llm_error:upstream`` (``max_response_bytes``)."""


class _AnswerTooLarge(httpx.ReadError):
    """An answer past ``max_response_bytes``, or compressed (which could expand past it): not read further."""


class _BoundedBody(httpx.AsyncByteStream):
    """A response body read at most ``limit`` bytes far: reading stops there, before the rest is received."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, request: httpx.Request) -> None:
        self._inner, self._limit, self._request = inner, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise _AnswerTooLarge(f"the answer is over {self._limit} bytes", request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _FailFastTransport(httpx.AsyncBaseTransport):
    """Turns "could not connect" into the SDK's :class:`openai.APIConnectionError`, which the SDK raises without
    retrying: an endpoint that refuses connections will not accept one a second later, and the SDK's backoff
    would hold the turn for seconds. Timeouts and HTTP statuses are left to the SDK's retries.

    It also bounds what is read of an answer (:data:`MAX_RESPONSE_BYTES`, or the model's ``max_response_bytes``):
    the body is read through :class:`_BoundedBody`, and asked for uncompressed (a compressed one is refused: its
    size says nothing of what it expands to)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self._inner = inner
        self._limit = max_response_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["accept-encoding"] = "identity"
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.ConnectError as exc:
            raise openai.APIConnectionError(message=f"could not connect: {exc}", request=request) from exc
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise _AnswerTooLarge(
                f"the answer is compressed ({encoding[:40]}) although asked not to be", request=request
            )
        assert isinstance(response.stream, httpx.AsyncByteStream)  # an async transport's answer
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedBody(response.stream, self._limit, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _to_params(messages: Sequence[ChatMessage]) -> list[ChatCompletionMessageParam]:
    params: list[ChatCompletionMessageParam] = []
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, str):
            raise ConfigurationError(f"messages[{index}].content must be a str, got {type(content).__name__}")
        if role == "system":
            params.append(ChatCompletionSystemMessageParam(role="system", content=content))
        elif role == "user":
            params.append(ChatCompletionUserMessageParam(role="user", content=content))
        elif role == "assistant":
            params.append(ChatCompletionAssistantMessageParam(role="assistant", content=content))
        else:
            raise ConfigurationError(f"messages[{index}].role must be system, user or assistant, got {role!r}")
    if not params:
        raise ConfigurationError("a chat completion needs at least one message, got none")
    return params


class OpenAIChatModel(ClosedOnExit):
    """Chat completions from an OpenAI-compatible endpoint through ``openai.AsyncOpenAI``.

    Build it from settings at the entry point (:meth:`from_settings`) and close it when done (:meth:`aclose`
    or ``async with``). Nothing is read from the environment here: every value is passed in.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        breaker_seconds: float = DEFAULT_BREAKER_SECONDS,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"OpenAIChatModel needs a model name, got {model!r}")
        if not isinstance(api_key, str) or not api_key.strip():
            raise ConfigurationError(
                "OpenAIChatModel needs an API key (OPENAI_API_KEY); local servers that do not check it "
                "(Ollama, vLLM, llama.cpp) accept any placeholder such as 'local'"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout):
            raise ConfigurationError(f"OpenAIChatModel.timeout must be a finite number of seconds, got {timeout!r}")
        if timeout <= 0:
            raise ConfigurationError(f"OpenAIChatModel.timeout must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"OpenAIChatModel.max_retries must be an integer >= 0, got {max_retries!r}")
        if (
            isinstance(breaker_seconds, bool)
            or not isinstance(breaker_seconds, int | float)
            or not math.isfinite(breaker_seconds)
            or breaker_seconds < 0
        ):
            raise ConfigurationError(
                f"OpenAIChatModel.breaker_seconds (ROUTEGATE_LLM_BREAKER_SECONDS) must be a finite number of "
                f"seconds >= 0 (0: no breaker), got {breaker_seconds!r}"
            )
        if http_client is not None and transport is not None:
            raise ConfigurationError("give OpenAIChatModel an http_client or a transport, not both")
        if isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int) or max_response_bytes < 1024:
            raise ConfigurationError(
                f"OpenAIChatModel.max_response_bytes must be an integer >= 1024, got {max_response_bytes!r}"
            )
        if http_client is None:
            inner = transport or httpx.AsyncHTTPTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
            bounded = _FailFastTransport(inner, max_response_bytes=max_response_bytes)
            http_client = openai.DefaultAsyncHttpxClient(transport=bounded)
        self.max_response_bytes = max_response_bytes
        self.breaker = CircuitBreaker(open_seconds=breaker_seconds)
        self._refusals: dict[OutputMode, str] = {}
        self.model = model.strip()
        self.base_url = check_base_url(base_url) if base_url else OPENAI_BASE_URL
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=max_retries,
            http_client=http_client,
        )

    @classmethod
    def from_settings(cls, settings: Settings, *, model: str | None = None) -> OpenAIChatModel:
        """The model configured by ``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL`` and
        ``OPENAI_TIMEOUT_SECONDS`` (and ``ROUTEGATE_OPENAI_MAX_RETRIES``). Raises
        :class:`~routegate.errors.ConfigurationError` when no API key is set (check ``settings.llm_enabled``).
        """
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key is not None else ""
        return cls(
            model=model or settings.openai_model,
            api_key=key,
            base_url=settings.openai_base_url or None,
            timeout=settings.openai_timeout_seconds,
            max_retries=settings.openai_max_retries,
            breaker_seconds=settings.llm_breaker_seconds,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r}, timeout={self.timeout!r})"

    @property
    def health(self) -> ModelHealth:
        """``ok``, ``degraded`` (a trial call is due) or ``down`` (the breaker is open: calls are not tried)."""
        return self.breaker.health

    async def probe(self, *, seconds: float = 5.0) -> LLMError | None:
        """Check once that the endpoint answers (``GET /models``, no retries, at most ``seconds``):
        ``None`` when it does (any HTTP answer but 401/403 counts: not every server lists its models), else the
        stop signal, which also opens the breaker. For start-up checks; never raises an SDK exception."""
        try:
            async with asyncio.timeout(min(seconds, self.timeout)):
                await self._client.with_options(max_retries=0).models.list()
        except openai.APIStatusError as exc:
            if exc.status_code not in (401, 403):
                self.breaker.succeeded()
                return None
            stop = self._stop(exc)
        except (openai.OpenAIError, httpx.HTTPError, TimeoutError, ValueError) as exc:
            stop = self._stop(exc)
        else:
            self.breaker.succeeded()
            return None
        self.breaker.failed(stop)
        return stop

    @property
    def refused_modes(self) -> dict[OutputMode, str]:
        """The structured formats this endpoint refused, with its message (a copy): :meth:`respond` does not ask
        for them again. Only a refusal whose message names the format is remembered (a bare HTTP 400 may be about
        anything else, such as a prompt too long)."""
        return dict(self._refusals)

    def _refused(self) -> None:
        """Raise at once while the breaker is open (no connection attempt)."""
        stop = self.breaker.before_call()
        if stop is not None:
            logger.debug("llm call not tried: breaker open (%s)", stop.stop_reason)
            raise stop

    # -- the ChatModel protocol ------------------------------------------------------------------------------
    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        if json_mode:
            completion = await self._create(messages, temperature, response_format={"type": "json_object"})
        else:
            completion = await self._create(messages, temperature)
        text = reply_of(completion).text
        logger.debug("chat completion model=%s chars=%d", self.model, len(text))
        return text

    async def respond(
        self, messages: Sequence[ChatMessage], *, output: OutputFormat, temperature: float = 0.0
    ) -> ModelReply:
        """The reply in ``output``'s format (the :class:`~routegate.llm.structured.StructuredChatModel` protocol):
        function tools with ``tool_choice``, or ``response_format={"type": "json_schema", ...}``. An endpoint that
        refuses the format raises :class:`~routegate.llm.errors.LLMModeRefusedError` (the breaker is not touched:
        the endpoint answered); a refusal that names the format is remembered and not asked again."""
        earlier = self._refusals.get(output.mode)
        if earlier is not None:
            raise LLMModeRefusedError(
                f"model {self.model!r} at {self.base_url} refused {output.mode} earlier: {earlier}",
                mode=output.mode,
                remembered=True,
            )
        if isinstance(output, ToolsFormat):
            completion = await self._create(
                messages, temperature, output.mode, tools=tool_params(output), tool_choice=output.choice
            )
        else:
            completion = await self._create(messages, temperature, output.mode, response_format=schema_param(output))
        reply = reply_of(completion)
        logger.debug("chat completion model=%s mode=%s calls=%d", self.model, output.mode, len(reply.tool_calls))
        return reply

    async def _create(
        self, messages: Sequence[ChatMessage], temperature: float, mode: OutputMode | None = None, **options: Any
    ) -> object:
        """One chat completion (``options``: the request's output format), inside the breaker, the span and the
        timeout; every failure leaves as a stop signal (for a structured ``mode``, a refusal of it as
        :class:`~routegate.llm.errors.LLMModeRefusedError`)."""
        params = _to_params(messages)
        self._refused()
        active = tracer()
        attributes = self._span_attributes(temperature) if active is not None else None
        with span(active, f"chat {self.model}", attributes, kind=SpanKind.CLIENT) as llm_span:
            try:
                async with asyncio.timeout(self.timeout):
                    completion: object = await self._client.chat.completions.create(
                        model=self.model, messages=params, temperature=temperature, **options
                    )
            except openai.APIStatusError as exc:
                detail = failure_detail(exc)
                if mode is None or not refuses_mode(mode, exc.status_code, detail):
                    raise self._failed(exc, llm_span) from exc
                raise self._refusal(mode, exc.status_code, detail, llm_span) from exc
            except (openai.OpenAIError, httpx.HTTPError, TimeoutError, ValueError) as exc:
                raise self._failed(exc, llm_span) from exc
            self.breaker.succeeded()
            record_completion(llm_span, completion)
        return completion

    def _refusal(self, mode: OutputMode, status: int, detail: str, llm_span: Span) -> LLMModeRefusedError:
        """The endpoint refused ``mode``: it is up (the breaker closes), and a refusal naming the format is kept."""
        self.breaker.succeeded()
        refused = LLMModeRefusedError(
            f"model {self.model!r} at {self.base_url} refused {mode} (HTTP {status}: {detail})",
            mode=mode,
            status_code=status,
        )
        record_llm_error(llm_span, refused)
        if names_the_feature(mode, detail):
            self._refusals[mode] = f"HTTP {status}: {detail}"
        return refused

    async def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        params = _to_params(messages)
        self._refused()
        active = tracer()
        # a stream's span is not made current: a context attached across the generator's yields would be
        # detached in another context; the span is started here and ended when the stream ends
        llm_span = (
            active.start_span(f"chat {self.model}", kind=SpanKind.CLIENT, attributes=self._span_attributes(temperature))
            if active is not None
            else INVALID_SPAN
        )
        finish: list[str] = []
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    chunks = await self._client.chat.completions.create(
                        model=self.model, messages=params, temperature=temperature, stream=True
                    )
            except (openai.OpenAIError, httpx.HTTPError, TimeoutError, ValueError) as exc:
                raise self._failed(exc, llm_span) from exc
            self.breaker.succeeded()
            try:
                async with chunks:
                    async for chunk in chunks:
                        for choice in chunk.choices or ():
                            if choice.finish_reason:
                                finish.append(str(choice.finish_reason))
                            delta = choice.delta.content if choice.delta is not None else None
                            if delta:
                                yield delta
            except (openai.OpenAIError, httpx.HTTPError, TimeoutError, ValueError) as exc:
                raise self._failed(exc, llm_span) from exc
            if finish and llm_span.is_recording():
                llm_span.set_attribute(GenAI.FINISH_REASONS, finish)
        finally:
            llm_span.end()

    def _span_attributes(self, temperature: float) -> dict[str, str | float | int]:
        """The GenAI semantic-convention attributes of a request to this model."""
        url = httpx.URL(self.base_url)
        out: dict[str, str | float | int] = {
            GenAI.OPERATION: "chat",
            GenAI.PROVIDER: "openai",
            GenAI.REQUEST_MODEL: self.model,
            GenAI.REQUEST_TEMPERATURE: temperature,
            "server.address": url.host,
        }
        if url.port is not None:
            out["server.port"] = url.port
        return out

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    # -- error mapping ---------------------------------------------------------------------------------------
    def _failed(self, exc: BaseException, llm_span: Span) -> LLMError:
        """The stop signal for ``exc``, counted by the breaker and recorded on the call's span."""
        stop = self._stop(exc)
        self.breaker.failed(stop)
        record_llm_error(llm_span, stop)
        return stop

    def _stop(self, exc: BaseException) -> LLMError:
        """The stop signal for one SDK / transport failure."""
        where = f"model {self.model!r} at {self.base_url}"
        kind = failure_kind(exc)
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        answered = f"{where} answered HTTP {status}: {failure_detail(exc)}"
        too_large = exc if isinstance(exc, _AnswerTooLarge) else exc.__cause__
        stop: LLMError
        if isinstance(too_large, _AnswerTooLarge):  # raised while the SDK read: it may have wrapped it
            stop = LLMUpstreamError(
                f"{where} gave an answer that is not read: {too_large} (max_response_bytes={self.max_response_bytes})"
            )
        elif kind == "timeout" and status is None:
            stop = LLMTimeoutError(f"{where} did not answer within timeout={self.timeout:g}s (OPENAI_TIMEOUT_SECONDS)")
        elif kind == "connect":
            stop = LLMConnectError(
                f"{where} could not be reached: {failure_detail(exc)} (check OPENAI_BASE_URL and that the server is up)"
            )
        elif status is None:
            stop = LLMUpstreamError(f"{where} gave an unusable answer ({type(exc).__name__}): {failure_detail(exc)}")
        elif kind == "auth":
            stop = LLMAuthError(answered, status_code=status)
        elif kind == "rate_limited":
            stop = LLMRateLimitedError(f"{answered} (after {self.max_retries} retries)", status_code=status)
        elif kind == "timeout":
            stop = LLMTimeoutError(answered, status_code=status)
        elif kind == "bad_request":
            stop = LLMBadRequestError(answered, status_code=status)
        elif status >= 500:
            stop = LLMUpstreamError(f"{answered} (after {self.max_retries} retries)", status_code=status)
        else:
            stop = LLMUpstreamError(answered, status_code=status)
        logger.debug("llm stop %s (%s)", stop.stop_reason, type(exc).__name__)
        return stop
