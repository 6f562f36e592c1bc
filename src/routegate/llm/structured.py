"""Answers in structure: a chat model that can be asked for a tool call or for JSON that fits a schema.

The plain :class:`~routegate.llm.protocol.ChatModel` answers text (``complete``, optionally asking for a JSON
object). A :class:`StructuredChatModel` also has :meth:`~StructuredChatModel.respond`, which sends one of two
output formats the OpenAI chat API defines and returns a :class:`ModelReply`:

* :class:`ToolsFormat` — function tools (``tools=[{"type": "function", ...}]``) and ``tool_choice``; the reply's
  :attr:`ModelReply.tool_calls` hold what the model called, arguments as the JSON text it wrote;
* :class:`SchemaFormat` — ``response_format={"type": "json_schema", "json_schema": {...}}``, strict or not; the
  reply's :attr:`ModelReply.text` is the JSON.

Whatever comes back is untrusted: a constrained model narrows what it can say, it does not make it right. The
callers (the LLM router, the LLM finalizer) hand it to the same checks as free text.

An endpoint that does not offer a format answers with an error; :class:`~routegate.llm.errors.LLMModeRefusedError`
says so (the callers then fall back to a weaker format: :mod:`routegate.routers.llm`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from routegate.llm.protocol import ChatMessage, ChatModel

OutputMode = Literal["tools", "json_schema"]
"""The structured output formats a :class:`StructuredChatModel` can be asked for."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One function tool offered to the model: its name, what it does and its parameters' JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The tool as the chat API takes it (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclass(frozen=True, slots=True)
class ToolsFormat:
    """Ask for a tool call: ``tools`` offered, ``choice`` ``"required"`` (one call at least) or ``"auto"``."""

    tools: tuple[ToolSpec, ...]
    choice: Literal["required", "auto"] = "required"
    mode: OutputMode = field(default="tools", init=False)


@dataclass(frozen=True, slots=True)
class SchemaFormat:
    """Ask for JSON that fits ``schema`` (``strict``: the endpoint constrains decoding to it, OpenAI's strict mode)."""

    name: str
    schema: Mapping[str, Any]
    strict: bool = True
    mode: OutputMode = field(default="json_schema", init=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``response_format`` value of the chat API."""
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": dict(self.schema), "strict": self.strict},
        }


OutputFormat = ToolsFormat | SchemaFormat


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a reply: the tool's name and its arguments as the JSON text the model wrote (unparsed,
    untrusted); ``id`` is the endpoint's id of the call (``""`` when it gave none)."""

    name: str
    arguments: str
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What the model answered: its text (``""`` when none), its tool calls, its refusal (OpenAI's
    ``message.refusal``, when the model declined) and the finish reason the endpoint gave."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    refusal: str | None = None
    finish_reason: str | None = None


@runtime_checkable
class StructuredChatModel(ChatModel, Protocol):
    """A chat model that can also answer in structure (:class:`~routegate.llm.OpenAIChatModel` and
    :class:`~routegate.testing.ScriptedChatModel` are)."""

    async def respond(
        self, messages: Sequence[ChatMessage], *, output: OutputFormat, temperature: float = 0.0
    ) -> ModelReply:
        """The model's reply to ``messages`` in ``output``'s format. Endpoint failures raise
        :class:`~routegate.llm.errors.LLMError` stop signals; an endpoint that does not offer the format raises
        :class:`~routegate.llm.errors.LLMModeRefusedError`."""
        ...


__all__ = [
    "ModelReply",
    "OutputFormat",
    "OutputMode",
    "SchemaFormat",
    "StructuredChatModel",
    "ToolCall",
    "ToolSpec",
    "ToolsFormat",
]
