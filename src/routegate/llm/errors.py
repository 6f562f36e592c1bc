"""Stop signals of the LLM layer: each maps one kind of model-endpoint failure to one stop reason.

They are :class:`~routegate.errors.RunStopError` subclasses, so a router or finalizer that raises one ends the
run with its ``stop_reason`` (data on the result), never with a stack trace. The runtime fills in the phase.
"""

from __future__ import annotations

from typing import ClassVar, Final

from routegate.core import stop_reasons as sr
from routegate.errors import RunStopError

LLM_CONNECT: Final = "llm_error:connect"
"""The endpoint could not be reached at all (DNS, refused connection, TLS): not a timeout."""


class LLMError(RunStopError):
    """Base of the LLM stop signals. ``status_code`` is the HTTP status when the endpoint answered with one."""

    reason: ClassVar[str] = sr.LLM_UPSTREAM

    def __init__(self, message: str = "", *, status_code: int | None = None, phase: str | None = None) -> None:
        super().__init__(self.reason, message or self.reason, phase=phase)
        self.status_code = status_code

    @property
    def unavailable(self) -> bool:
        """True when the endpoint cannot serve now — unreachable, no answer in time, refused credentials, rate
        limited or HTTP 5xx after the retries — as opposed to a refused request or an unusable answer. A desk
        answers such a turn offline (``fallback: llm_unavailable``) and the model's circuit breaker opens."""
        if self.stop_reason in (LLM_CONNECT, sr.LLM_TIMEOUT, sr.LLM_AUTH, sr.LLM_RATE_LIMITED):
            return True
        return self.stop_reason == sr.LLM_UPSTREAM and self.status_code is not None and self.status_code >= 500


class LLMTimeoutError(LLMError):
    """The endpoint did not answer in time, or answered HTTP 408 (``llm_timeout``)."""

    reason = sr.LLM_TIMEOUT


class LLMConnectError(LLMError):
    """The endpoint could not be reached after the retries: name resolution, refused connection, TLS
    (``llm_error:connect``). Check ``OPENAI_BASE_URL`` and that the server is up."""

    reason = LLM_CONNECT


class LLMEmptyError(LLMError):
    """The model returned an empty answer where text was required (``llm_empty``)."""

    reason = sr.LLM_EMPTY


class LLMAuthError(LLMError):
    """The endpoint refused the credentials: HTTP 401 or 403 (``llm_error:auth``)."""

    reason = sr.LLM_AUTH


class LLMRateLimitedError(LLMError):
    """HTTP 429 after the client's retries (``llm_error:rate_limited``)."""

    reason = sr.LLM_RATE_LIMITED


class LLMUpstreamError(LLMError):
    """HTTP 5xx after retries, or an answer that is not a chat completion (``llm_error:upstream``)."""

    reason = sr.LLM_UPSTREAM


class LLMBadRequestError(LLMError):
    """Any other HTTP 4xx: the request itself was refused, retrying will not help (``llm_error:bad_request``)."""

    reason = sr.LLM_BAD_REQUEST


LLM_BAD_OUTPUT: Final = "llm_error:bad_output"
"""The model answered, but not in the structure asked for (the LLM finalizer's ``extra`` that does not fit its
schema)."""


class LLMOutputError(LLMError):
    """The model's structured answer does not fit what was asked (``llm_error:bad_output``); the message names the
    field and what was wrong. The endpoint worked: not a reason to open the breaker."""

    reason = LLM_BAD_OUTPUT


class LLMModeRefusedError(LLMBadRequestError):
    """The endpoint does not offer the structured output asked for (``mode``: ``"tools"`` or ``"json_schema"``):
    it answered HTTP 400 / 422, or a 5xx whose message names the feature (llama.cpp's server without ``--jinja``).
    ``remembered``: the refusal was not asked again, the model remembered an earlier one
    (:attr:`~routegate.llm.OpenAIChatModel.refused_modes`). Callers fall back to a weaker format; if it escapes,
    its stop reason is ``llm_error:bad_request``."""

    def __init__(
        self, message: str = "", *, mode: str, status_code: int | None = None, remembered: bool = False
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.mode = mode
        self.remembered = remembered


__all__ = [
    "LLM_BAD_OUTPUT",
    "LLM_CONNECT",
    "LLMAuthError",
    "LLMBadRequestError",
    "LLMConnectError",
    "LLMEmptyError",
    "LLMError",
    "LLMModeRefusedError",
    "LLMOutputError",
    "LLMRateLimitedError",
    "LLMTimeoutError",
    "LLMUpstreamError",
]
