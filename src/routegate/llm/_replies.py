"""The chat API's side of a structured call: the request's parameters for an output format, the reply read back
defensively (a non-OpenAI server may answer anything with HTTP 200), and what counts as an endpoint refusing a
format."""

from __future__ import annotations

import re
from typing import Final

from openai.types.chat import ChatCompletionToolParam
from openai.types.shared_params import FunctionDefinition, ResponseFormatJSONSchema

from routegate.llm.errors import LLMUpstreamError
from routegate.llm.structured import ModelReply, OutputMode, SchemaFormat, ToolCall, ToolsFormat

_FEATURE_WORDS: Final[dict[OutputMode, re.Pattern[str]]] = {
    "tools": re.compile(r"tool|function|jinja", re.IGNORECASE),
    "json_schema": re.compile(r"response_format|json_schema|schema|grammar|structured", re.IGNORECASE),
}
_REFUSED_STATUSES: Final = frozenset({400, 422, 501})


def tool_params(output: ToolsFormat) -> list[ChatCompletionToolParam]:
    return [
        ChatCompletionToolParam(
            type="function",
            function=FunctionDefinition(name=tool.name, description=tool.description, parameters=dict(tool.parameters)),
        )
        for tool in output.tools
    ]


def schema_param(output: SchemaFormat) -> ResponseFormatJSONSchema:
    return ResponseFormatJSONSchema(
        type="json_schema",
        json_schema={"name": output.name, "schema": dict(output.schema), "strict": output.strict},
    )


def names_the_feature(mode: OutputMode, message: str) -> bool:
    """Does an error message speak of the format (``"tools param requires --jinja flag"``, "does not support
    tools", "Invalid schema for response_format")? Only such a refusal is remembered by the model."""
    return _FEATURE_WORDS[mode].search(message) is not None


def refuses_mode(mode: OutputMode, status: int, message: str) -> bool:
    """Is this HTTP error the endpoint refusing ``mode``? A 400 / 422 / 501 to a request carrying the format, or a
    5xx whose message names it (llama.cpp's server answers ``tools`` without ``--jinja`` with a 500)."""
    return status in _REFUSED_STATUSES or (status >= 500 and names_the_feature(mode, message))


def reply_of(completion: object) -> ModelReply:
    """The first choice of a chat completion as a :class:`ModelReply`."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list):
        raise LLMUpstreamError(
            f"the model endpoint answered HTTP 200 with something that is not a chat completion "
            f"({type(completion).__name__} without choices)"
        )
    if not choices:
        return ModelReply()
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise LLMUpstreamError(f"the model's message content is {type(content).__name__}, not text")
    refusal = getattr(message, "refusal", None)
    finish = getattr(choice, "finish_reason", None)
    return ModelReply(
        text=content or "",
        tool_calls=tuple(_calls(getattr(message, "tool_calls", None))),
        refusal=refusal if isinstance(refusal, str) and refusal else None,
        finish_reason=str(finish) if finish else None,
    )


def _calls(raw: object) -> list[ToolCall]:
    if not isinstance(raw, list):
        return []
    calls = []
    for item in raw:
        function = getattr(item, "function", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        if function is None:  # a custom (free-text) tool call: its name and input
            custom = getattr(item, "custom", None)
            name, arguments = getattr(custom, "name", None), getattr(custom, "input", None)
        ident = getattr(item, "id", None)
        calls.append(
            ToolCall(
                name=name if isinstance(name, str) else "",
                arguments=arguments if isinstance(arguments, str) else "",
                id=ident if isinstance(ident, str) else "",
            )
        )
    return calls
