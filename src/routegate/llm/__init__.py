"""routegate.llm: the chat-model seam and its OpenAI-compatible implementation.

* :class:`ChatModel` — the protocol every LLM-backed component takes (``complete`` and ``stream``);
  :class:`StructuredChatModel` adds ``respond``: a tool call or JSON that fits a schema (:mod:`.structured`).
* :class:`OpenAIChatModel` — any OpenAI-compatible endpoint through the official ``openai`` SDK; timeouts,
  retries with backoff, and every failure mapped to a stop reason (:mod:`routegate.llm.errors`).
* :class:`LLMFinalizer` — the routing agent's final-answer step (``llm_empty`` on an empty answer).
* The LLM router lives in :mod:`routegate.routers.llm`; test doubles in :mod:`routegate.testing`.

``OpenAIChatModel`` is imported on first use: the ``openai`` SDK takes about a second to import, and the
offline paths (and the test doubles) only need the protocol, the errors and the prompts.
"""

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.llm.errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMConnectError,
    LLMEmptyError,
    LLMError,
    LLMModeRefusedError,
    LLMRateLimitedError,
    LLMTimeoutError,
    LLMUpstreamError,
)
from routegate.llm.finalizer import LLMFinalizer
from routegate.llm.prompts import FINAL_SYSTEM_PROMPT, ROUTER_SYSTEM_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.llm.structured import StructuredChatModel

if TYPE_CHECKING:
    from routegate.llm.openai_chat import OpenAIChatModel

__all__ = [
    "FINAL_SYSTEM_PROMPT",
    "ROUTER_SYSTEM_PROMPT",
    "ChatMessage",
    "ChatModel",
    "LLMAuthError",
    "LLMBadRequestError",
    "LLMConnectError",
    "LLMEmptyError",
    "LLMError",
    "LLMFinalizer",
    "LLMModeRefusedError",
    "LLMRateLimitedError",
    "LLMTimeoutError",
    "LLMUpstreamError",
    "OpenAIChatModel",
    "StructuredChatModel",
]


__getattr__, __dir__ = _lazy_exports(__name__, {"OpenAIChatModel": "openai_chat"}, __all__, moved={"Role": "protocol"})
