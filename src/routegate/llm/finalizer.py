"""The LLM finalizer: the seed's final-synthesis step, evidence taken only from the run's history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from routegate.core.protocols import FinalizeRequest
from routegate.llm.errors import LLMEmptyError
from routegate.llm.prompts import FINAL_SYSTEM_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel


def final_payload(request: FinalizeRequest) -> dict[str, Any]:
    """What the model is shown: the goal, the route that completed and the history (routes + observations)."""
    return {
        "goal": request.goal,
        "selected_route": request.selected_route,
        "history": [entry.to_dict() for entry in request.history],
    }


def final_messages(request: FinalizeRequest, *, system_prompt: str = FINAL_SYSTEM_PROMPT) -> list[ChatMessage]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": json.dumps(final_payload(request), ensure_ascii=True)},
    ]


class LLMFinalizer:
    """Composes the final answer with a chat model; calls no worker.

    An empty (or blank) answer is not masked with fallback text: it stops the run with ``llm_empty``.
    Endpoint failures stop it with the model's own stop reasons (``llm_timeout``, ``llm_error:*``).
    """

    def __init__(self, chat_model: ChatModel, *, system_prompt: str = FINAL_SYSTEM_PROMPT) -> None:
        self.chat_model = chat_model
        self.system_prompt = system_prompt

    async def astream(self, request: FinalizeRequest) -> AsyncIterator[str]:
        """The final answer as it is generated (for streaming servers); leading blank deltas are dropped and an
        answer that stays blank ends with :class:`~routegate.llm.errors.LLMEmptyError` after the stream."""
        started = False
        async for delta in self.chat_model.stream(final_messages(request, system_prompt=self.system_prompt)):
            if not started:
                delta = delta.lstrip()
                started = bool(delta)
            if delta:
                yield delta
        if not started:
            raise LLMEmptyError(f"the model streamed an empty final answer for route {request.selected_route!r}")

    async def finalize(self, request: FinalizeRequest) -> str:
        text = await self.chat_model.complete(final_messages(request, system_prompt=self.system_prompt))
        answer = text.strip()
        if not answer:
            raise LLMEmptyError(
                f"the model returned an empty final answer ({len(text)} characters, all blank) "
                f"for route {request.selected_route!r}"
            )
        return answer
