"""The chat model's OpenTelemetry span follows the GenAI semantic conventions and carries no text."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from routegate.llm import LLMAuthError, OpenAIChatModel
from routegate.testing import ErrorReply, Reply, ScriptedOpenAIServer

ASK = [{"role": "user", "content": "my password is hunter2"}]


async def test_a_completion_is_a_chat_span_with_usage(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, otel_spans: InMemorySpanExporter
) -> None:
    server.script(Reply("the answer"))
    assert await model.complete(ASK) == "the answer"
    (span,) = otel_spans.get_finished_spans()
    assert span.name == "chat scripted-model"
    assert span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "scripted-model"
    assert attributes["gen_ai.response.model"] == "scripted-model"
    assert attributes["gen_ai.usage.input_tokens"] > 0
    assert attributes["gen_ai.usage.output_tokens"] > 0
    assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
    assert attributes["server.address"] == "127.0.0.1"
    assert not any("hunter2" in str(v) or "the answer" in str(v) for v in attributes.values())


async def test_a_failed_call_records_its_stop_reason(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, otel_spans: InMemorySpanExporter
) -> None:
    server.script(ErrorReply(401))
    with pytest.raises(LLMAuthError):
        await model.complete(ASK)
    (span,) = otel_spans.get_finished_spans()
    assert dict(span.attributes or {})["error.type"] == "llm_error:auth"
    assert span.status.status_code is StatusCode.ERROR


async def test_a_stream_is_one_span_ended_when_the_stream_ends(
    server: ScriptedOpenAIServer, model: OpenAIChatModel, otel_spans: InMemorySpanExporter
) -> None:
    server.script(Reply("one two three"))
    text = "".join([chunk async for chunk in model.stream(ASK)])
    assert text == "one two three"
    (span,) = otel_spans.get_finished_spans()
    assert span.name == "chat scripted-model"
    assert tuple(dict(span.attributes or {})["gen_ai.response.finish_reasons"]) == ("stop",)
