"""The LLM router: the routing decision made by a chat model, in the output format the model is built for.

The model sees the goal, the routing budgets, the targets it must not pick (after a ``needs_reroute``), a compact
state summary, the last three history entries and the routes it may take. How it answers is the router's
``mode``:

* ``"json"`` (the default, the routing agent's original contract): the catalogue in the prompt and ``response_format={"type":
  "json_object"}``; the text is the decision.
* ``"tools"``: each route it may take this attempt is a function tool whose parameters are the route's argument
  schema, ``tool_choice="required"``; the tool call is the decision (:func:`~routegate.routers.llm_formats.route_intents`).
* ``"json_schema"``: one strict schema, a union of the routes (:func:`~routegate.routers.llm_formats.route_schema`).
* ``"auto"``: the strongest of those the endpoint accepts (``tools``, then ``json_schema``, then ``json``); an
  :class:`~routegate.llm.OpenAIChatModel` remembers what its endpoint refused, so each format is tried once.

An endpoint that refuses a format (:class:`~routegate.llm.errors.LLMModeRefusedError`), a reply without the tool
call, or a catalogue strict mode cannot express falls back to the next format, with one log line and a note in the
decision's ``why`` (the trace): never a failed run. Whatever the format, the answer is returned as the decision's
untrusted ``raw`` value, unvalidated: the policy boundary judges it exactly as it judges free JSON (text that is
not JSON becomes ``invalid_route:non_json`` with the text kept as ``raw_route``; a tool call naming a forbidden
target, an extra key or a wrong type get the same stop reasons as in JSON).
"""

from __future__ import annotations

import json
from typing import Any

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.errors import ConfigurationError
from routegate.llm.fallback import Format, Mode, ModeLadder, NoToolCall
from routegate.llm.prompts import ROUTER_SCHEMA_PROMPT, ROUTER_SYSTEM_PROMPT, ROUTER_TOOLS_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.routers.llm_formats import route_intents, route_schema, route_tools, schema_answer

RECENT_HISTORY = 3
RouterMode = Mode
"""How the LLM router asks the model for its decision: ``json``, ``tools``, ``json_schema`` or ``auto``."""


def route_payload(request: RouteRequest, *, recent: int = RECENT_HISTORY, routes: bool = True) -> dict[str, Any]:
    """The router payload for one route attempt (``routes=False``: without ``available_routes``, for a
    model that is offered the routes as tools)."""
    payload = {
        "goal": request.goal,
        "budgets": {
            "max_route_attempts": request.budget.max_route_attempts,
            "remaining_attempts": request.remaining_attempts,
        },
        "forbidden_targets": sorted(request.forbidden_targets),
        "state_summary": request.state_summary(),
        "recent_history": [entry.to_dict() for entry in request.history[-recent:]] if recent else [],
    }
    if routes:
        payload["available_routes"] = [spec.to_dict() for spec in request.catalog]
    return payload


def route_messages(
    request: RouteRequest,
    *,
    system_prompt: str = ROUTER_SYSTEM_PROMPT,
    recent: int = RECENT_HISTORY,
    routes: bool = True,
) -> list[ChatMessage]:
    return [
        {"role": "system", "content": system_prompt},
        {
            "role": "user",
            "content": json.dumps(route_payload(request, recent=recent, routes=routes), ensure_ascii=True),
        },
    ]


def _chose(value: dict[Any, Any]) -> str:
    target = value.get("target")
    if isinstance(target, str):
        return f"the model chose {target[:64]!r}"
    return "the model answered a JSON object without a target"


def _parse(text: str) -> tuple[object, str]:
    """The decision's raw value and a note for the trace: a parsed JSON object, else the text itself."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text, f"the model answered {len(text)} characters that are not JSON"
    if not isinstance(value, dict):
        return text, f"the model answered JSON {type(value).__name__}, not an object"
    return value, _chose(value)


class LLMRouter:
    """Routes with a chat model (any :class:`~routegate.llm.protocol.ChatModel`).

    ``mode``: ``"json"`` (default), ``"tools"``, ``"json_schema"`` or ``"auto"`` (module documentation); the two
    structured modes need a :class:`~routegate.llm.structured.StructuredChatModel`, ``"auto"`` uses JSON with any
    other chat model. ``system_prompt`` is the JSON mode's instructions, ``tools_prompt`` and ``schema_prompt``
    those of the structured modes. ``json_mode`` asks the endpoint for a JSON object in JSON mode (turn it off for
    servers without ``response_format`` support); ``recent_history`` is how many history entries the prompt carries.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        mode: RouterMode = "json",
        system_prompt: str = ROUTER_SYSTEM_PROMPT,
        tools_prompt: str = ROUTER_TOOLS_PROMPT,
        schema_prompt: str = ROUTER_SCHEMA_PROMPT,
        json_mode: bool = True,
        recent_history: int = RECENT_HISTORY,
        temperature: float = 0.0,
        name: str = "llm",
    ) -> None:
        if isinstance(recent_history, bool) or not isinstance(recent_history, int) or recent_history < 0:
            raise ConfigurationError(f"LLMRouter.recent_history must be an integer >= 0, got {recent_history!r}")
        self._ladder = ModeLadder(mode, chat_model, owner="LLMRouter")
        self.chat_model = chat_model
        self.mode: RouterMode = mode
        self.system_prompt = system_prompt
        self.tools_prompt = tools_prompt
        self.schema_prompt = schema_prompt
        self.json_mode = json_mode
        self.recent_history = recent_history
        self.temperature = temperature
        self.name = name

    @property
    def modes(self) -> tuple[str, ...]:
        """The formats this router tries, in order (the first that the endpoint and the catalogue take answers)."""
        return self._ladder.formats

    def messages(self, request: RouteRequest, mode: Format = "json") -> list[ChatMessage]:
        """The exact messages sent for ``request`` in ``mode``."""
        if mode == "tools":
            return route_messages(request, system_prompt=self.tools_prompt, recent=self.recent_history, routes=False)
        prompt = self.schema_prompt if mode == "json_schema" else self.system_prompt
        return route_messages(request, system_prompt=prompt, recent=self.recent_history)

    async def decide(self, request: RouteRequest) -> RouteDecision:
        (raw, why), notes = await self._ladder.first(lambda fmt: self._ask(fmt, request))
        return RouteDecision(raw=raw, decided_by=self.name, why="; ".join([*notes, why]))

    async def _ask(self, fmt: Format, request: RouteRequest) -> tuple[object, str]:
        if fmt == "tools":
            return await self._tools(request)
        if fmt == "json_schema":
            return await self._schema(request)
        text = await self.chat_model.complete(
            self.messages(request), json_mode=self.json_mode, temperature=self.temperature
        )
        return _parse(text)

    async def _tools(self, request: RouteRequest) -> tuple[object, str]:
        tools = route_tools(request.catalog, request.forbidden_targets)
        if not tools.format.tools:
            raise NoToolCall("no route is left to offer as a tool")
        reply = await self._ladder.model().respond(
            self.messages(request, "tools"), output=tools.format, temperature=self.temperature
        )
        if not reply.tool_calls:
            said = f"refused: {reply.refusal[:80]!r}" if reply.refusal else f"{len(reply.text)} characters of text"
            raise NoToolCall(f"the model answered without a tool call ({said})")
        intents = route_intents(reply.tool_calls, tools)
        if len(intents) == 1:
            return intents[0], f"the model called {reply.tool_calls[0].name[:64]!r}"
        names = ", ".join(repr(call.name[:64]) for call in reply.tool_calls[:5])
        return intents, f"the model called {len(intents)} tools ({names}); one route is taken per attempt"

    async def _schema(self, request: RouteRequest) -> tuple[object, str]:
        schema = route_schema(request.catalog, request.forbidden_targets)
        reply = await self._ladder.model().respond(
            self.messages(request, "json_schema"), output=schema.format, temperature=self.temperature
        )
        if reply.refusal and not reply.text:
            return reply.refusal, f"the model refused: {reply.refusal[:80]!r}"
        raw, why = _parse(reply.text)
        if not isinstance(raw, dict):
            return raw, why
        answer = schema_answer(raw, schema)
        return answer, _chose(answer)
