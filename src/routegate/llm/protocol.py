"""The chat-model seam: every LLM-backed component takes a :class:`ChatModel`, never a concrete client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Literal, NotRequired, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:
    from routegate.llm.errors import LLMError

Role = Literal["system", "user", "assistant", "tool"]
ModelHealth = Literal["ok", "degraded", "down"]
"""A model endpoint's state as ``/healthz`` and ``/metrics`` report it: ``ok`` (answering), ``degraded`` (its
breaker's window has passed: the next call is a trial), ``down`` (the breaker is open: calls are not tried)."""


class ToolCallData(TypedDict):
    """One tool call an assistant message made, as a conversation carries it back to the model: the endpoint's id
    of the call, the tool's name and the arguments as the JSON text the model wrote."""

    id: str
    name: str
    arguments: str


class ChatMessage(TypedDict):
    """One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``.

    A tool-using conversation also carries the calls an assistant message made (``tool_calls``) and each tool's
    result as a ``{"role": "tool", "tool_call_id": <the call's id>, "content": "..."}`` message."""

    role: Role
    content: str
    tool_calls: NotRequired[list[ToolCallData]]
    """An assistant message's tool calls (only on ``assistant``)."""
    tool_call_id: NotRequired[str]
    """The call a ``tool`` message answers."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. Failures are raised as :class:`~routegate.llm.errors.LLMError` stop signals."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        """The whole answer as text (``""`` when the model returned no content). ``json_mode`` asks the
        endpoint for a JSON object (``response_format={"type": "json_object"}``); the caller still validates it.
        """
        ...

    def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        """The answer as it is generated: an async iterator of text deltas."""
        ...


@runtime_checkable
class ReportsHealth(Protocol):
    """A chat model that knows its endpoint's state (:class:`~routegate.llm.OpenAIChatModel` does)."""

    @property
    def health(self) -> ModelHealth: ...


@runtime_checkable
class Probes(Protocol):
    """A chat model that can check its endpoint once (:meth:`~routegate.llm.OpenAIChatModel.probe`)."""

    async def probe(self, *, seconds: float = 5.0) -> LLMError | None: ...
