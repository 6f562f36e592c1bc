"""The LLM router: the seed's routing decision by a chat model, in JSON mode.

The model sees the goal, the routing budgets, the targets it must not pick (after a ``needs_reroute``), a compact
state summary, the last three history entries and the catalogue of allowed routes. Its answer is returned as
the decision's untrusted ``raw`` value, unvalidated: the policy boundary judges it (non-JSON text becomes
``invalid_route:non_json`` with the text kept as ``raw_route``).
"""

from __future__ import annotations

import json
from typing import Any

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.errors import ConfigurationError
from routegate.llm.prompts import ROUTER_SYSTEM_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel

RECENT_HISTORY = 3


def route_payload(request: RouteRequest, *, recent: int = RECENT_HISTORY) -> dict[str, Any]:
    """The seed's router payload for one route attempt."""
    return {
        "goal": request.goal,
        "budgets": {
            "max_route_attempts": request.budget.max_route_attempts,
            "remaining_attempts": request.remaining_attempts,
        },
        "forbidden_targets": sorted(request.forbidden_targets),
        "state_summary": request.state_summary(),
        "recent_history": [entry.to_dict() for entry in request.history[-recent:]] if recent else [],
        "available_routes": [spec.to_dict() for spec in request.catalog],
    }


def route_messages(
    request: RouteRequest, *, system_prompt: str = ROUTER_SYSTEM_PROMPT, recent: int = RECENT_HISTORY
) -> list[ChatMessage]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": json.dumps(route_payload(request, recent=recent), ensure_ascii=True)},
    ]


def _parse(text: str) -> tuple[object, str]:
    """The decision's raw value and a note for the trace: a parsed JSON object, else the text itself."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text, f"the model answered {len(text)} characters that are not JSON"
    if not isinstance(value, dict):
        return text, f"the model answered JSON {type(value).__name__}, not an object"
    target = value.get("target")
    if isinstance(target, str):
        return value, f"the model chose {target[:64]!r}"
    return value, "the model answered a JSON object without a target"


class LLMRouter:
    """Routes with a chat model (any :class:`~routegate.llm.protocol.ChatModel`).

    ``json_mode`` asks the endpoint for a JSON object (turn it off for servers without
    ``response_format`` support); ``recent_history`` is how many history entries the prompt carries.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        system_prompt: str = ROUTER_SYSTEM_PROMPT,
        json_mode: bool = True,
        recent_history: int = RECENT_HISTORY,
        temperature: float = 0.0,
        name: str = "llm",
    ) -> None:
        if isinstance(recent_history, bool) or not isinstance(recent_history, int) or recent_history < 0:
            raise ConfigurationError(f"LLMRouter.recent_history must be an integer >= 0, got {recent_history!r}")
        self.chat_model = chat_model
        self.system_prompt = system_prompt
        self.json_mode = json_mode
        self.recent_history = recent_history
        self.temperature = temperature
        self.name = name

    def messages(self, request: RouteRequest) -> list[ChatMessage]:
        """The exact messages sent for ``request``."""
        return route_messages(request, system_prompt=self.system_prompt, recent=self.recent_history)

    async def decide(self, request: RouteRequest) -> RouteDecision:
        text = await self.chat_model.complete(
            self.messages(request), json_mode=self.json_mode, temperature=self.temperature
        )
        raw, why = _parse(text)
        return RouteDecision(raw=raw, decided_by=self.name, why=why)
