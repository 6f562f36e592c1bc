"""The OpenTelemetry GenAI semantic conventions for a chat call: span ``chat {model}``, request and usage attributes.

Only the names and counts travel on the span, never a prompt or a completion's text.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.trace import Span, StatusCode

from routegate.llm.errors import LLMError


class GenAI:
    OPERATION: Final = "gen_ai.operation.name"
    PROVIDER: Final = "gen_ai.provider.name"
    REQUEST_MODEL: Final = "gen_ai.request.model"
    REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
    RESPONSE_MODEL: Final = "gen_ai.response.model"
    RESPONSE_ID: Final = "gen_ai.response.id"
    FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
    INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
    OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
    ERROR_TYPE: Final = "error.type"


def record_completion(span: Span, completion: object) -> None:
    """The response attributes of a chat completion (whatever of them the server sent)."""
    if not span.is_recording():
        return
    model = getattr(completion, "model", None)
    if isinstance(model, str) and model:
        span.set_attribute(GenAI.RESPONSE_MODEL, model)
    response_id = getattr(completion, "id", None)
    if isinstance(response_id, str) and response_id:
        span.set_attribute(GenAI.RESPONSE_ID, response_id)
    usage = getattr(completion, "usage", None)
    for attribute, field in ((GenAI.INPUT_TOKENS, "prompt_tokens"), (GenAI.OUTPUT_TOKENS, "completion_tokens")):
        count = getattr(usage, field, None)
        if isinstance(count, int) and not isinstance(count, bool):
            span.set_attribute(attribute, count)
    choices = getattr(completion, "choices", None)
    if isinstance(choices, list):
        reasons = [str(c.finish_reason) for c in choices if getattr(c, "finish_reason", None)]
        if reasons:
            span.set_attribute(GenAI.FINISH_REASONS, reasons)


def record_llm_error(span: Span, stop: LLMError) -> None:
    """A failed call: ``error.type`` is the stop reason (``llm_timeout``, ``llm_error:auth``, ...)."""
    if span.is_recording():
        span.set_attribute(GenAI.ERROR_TYPE, stop.stop_reason)
        span.set_status(StatusCode.ERROR, stop.stop_reason)
