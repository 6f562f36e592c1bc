"""The chat-model seam: every LLM-backed component takes a :class:`ChatModel`, never a concrete client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol, TypedDict, runtime_checkable

Role = Literal["system", "user", "assistant"]


class ChatMessage(TypedDict):
    """One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

    role: Role
    content: str


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
