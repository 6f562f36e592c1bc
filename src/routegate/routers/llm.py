"""The LLM router: the seed's routing decision by a chat model, in the output format the model is built for.

The model sees the goal, the routing budgets, the targets it must not pick (after a ``needs_reroute``), a compact
state summary, the last three history entries and the routes it may take. How it answers is the router's
``mode``:

* ``"json"`` (the default, the seed's contract): the catalogue in the prompt and ``response_format={"type":
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
import logging
from typing import Any, Final, Literal, get_args

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.errors import ConfigurationError
from routegate.llm.errors import LLMModeRefusedError
from routegate.llm.prompts import ROUTER_SCHEMA_PROMPT, ROUTER_SYSTEM_PROMPT, ROUTER_TOOLS_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.llm.structured import StructuredChatModel
from routegate.routers.llm_formats import (
    StrictSchemaError,
    route_intents,
    route_schema,
    route_tools,
    schema_answer,
)

logger = logging.getLogger(__name__)

RECENT_HISTORY = 3
RouterMode = Literal["json", "json_schema", "tools", "auto"]
"""How the LLM router asks the model for its decision (see the module's documentation)."""
StructuredMode = Literal["tools", "json_schema"]
_LADDER: Final[tuple[Literal["tools", "json_schema", "json"], ...]] = ("tools", "json_schema", "json")


def route_payload(request: RouteRequest, *, recent: int = RECENT_HISTORY, routes: bool = True) -> dict[str, Any]:
    """The seed's router payload for one route attempt (``routes=False``: without ``available_routes``, for a
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


class _NoToolCall(Exception):
    """The model answered a tools request without calling one."""


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
        if mode not in get_args(RouterMode):
            raise ConfigurationError(f"LLMRouter.mode must be one of {', '.join(get_args(RouterMode))}, got {mode!r}")
        if mode in ("tools", "json_schema") and not isinstance(chat_model, StructuredChatModel):
            raise ConfigurationError(
                f"LLMRouter(mode={mode!r}) needs a chat model with respond() (OpenAIChatModel, ScriptedChatModel); "
                f"{type(chat_model).__name__} has none: use mode='json' or mode='auto'"
            )
        self.chat_model = chat_model
        self._structured = chat_model if isinstance(chat_model, StructuredChatModel) else None
        self.mode: RouterMode = mode
        self.system_prompt = system_prompt
        self.tools_prompt = tools_prompt
        self.schema_prompt = schema_prompt
        self.json_mode = json_mode
        self.recent_history = recent_history
        self.temperature = temperature
        self.name = name
        if mode == "json" or self._structured is None:
            self._ladder: tuple[Literal["tools", "json_schema", "json"], ...] = ("json",)
        else:
            self._ladder = _LADDER[_LADDER.index("tools" if mode == "auto" else mode) :]
        self._said: set[str] = set()

    @property
    def modes(self) -> tuple[str, ...]:
        """The formats this router tries, in order (the first that the endpoint and the catalogue take answers)."""
        return self._ladder

    def messages(
        self, request: RouteRequest, mode: Literal["tools", "json_schema", "json"] = "json"
    ) -> list[ChatMessage]:
        """The exact messages sent for ``request`` in ``mode``."""
        if mode == "tools":
            return route_messages(request, system_prompt=self.tools_prompt, recent=self.recent_history, routes=False)
        prompt = self.schema_prompt if mode == "json_schema" else self.system_prompt
        return route_messages(request, system_prompt=prompt, recent=self.recent_history)

    async def decide(self, request: RouteRequest) -> RouteDecision:
        notes: list[str] = []
        for mode in self._ladder:
            try:
                if mode == "tools":
                    raw, why = await self._tools(request)
                elif mode == "json_schema":
                    raw, why = await self._schema(request)
                else:
                    text = await self.chat_model.complete(
                        self.messages(request), json_mode=self.json_mode, temperature=self.temperature
                    )
                    raw, why = _parse(text)
            except LLMModeRefusedError as refused:
                note = f"{mode} refused by the endpoint" + (" (earlier)" if refused.remembered else "")
                self._say(f"{mode}:refused", "the endpoint refused %s (%s): falling back", mode, refused.message)
            except StrictSchemaError as exc:
                note = f"json_schema skipped: {exc}"
                self._say(f"json_schema:{exc}", "the routes cannot be one strict schema (%s): falling back", exc)
            except _NoToolCall as exc:
                note = f"tools: {exc}"
                logger.info("the model answered without a tool call (%s): falling back", exc)
            else:
                return RouteDecision(raw=raw, decided_by=self.name, why="; ".join([*notes, why]))
            notes.append(note)
        raise AssertionError("unreachable: the JSON mode ends every ladder")  # pragma: no cover

    def _say(self, key: str, message: str, *args: object) -> None:
        """One warning per kind of fallback and router; the later ones at debug level."""
        level = logging.DEBUG if key in self._said else logging.WARNING
        self._said.add(key)
        logger.log(level, message, *args)

    async def _tools(self, request: RouteRequest) -> tuple[object, str]:
        tools = route_tools(request.catalog, request.forbidden_targets)
        if not tools.format.tools:
            raise _NoToolCall("no route is left to offer as a tool")
        model = self._structured
        assert model is not None  # the ladder holds structured modes only for a structured model
        reply = await model.respond(self.messages(request, "tools"), output=tools.format, temperature=self.temperature)
        if not reply.tool_calls:
            said = f"refused: {reply.refusal[:80]!r}" if reply.refusal else f"{len(reply.text)} characters of text"
            raise _NoToolCall(f"the model answered without a tool call ({said})")
        intents = route_intents(reply.tool_calls, tools)
        if len(intents) == 1:
            return intents[0], f"the model called {reply.tool_calls[0].name[:64]!r}"
        names = ", ".join(repr(call.name[:64]) for call in reply.tool_calls[:5])
        return intents, f"the model called {len(intents)} tools ({names}); one route is taken per attempt"

    async def _schema(self, request: RouteRequest) -> tuple[object, str]:
        schema = route_schema(request.catalog, request.forbidden_targets)
        model = self._structured
        assert model is not None  # the ladder holds structured modes only for a structured model
        reply = await model.respond(
            self.messages(request, "json_schema"), output=schema.format, temperature=self.temperature
        )
        if reply.refusal and not reply.text:
            return reply.refusal, f"the model refused: {reply.refusal[:80]!r}"
        raw, why = _parse(reply.text)
        if not isinstance(raw, dict):
            return raw, why
        answer = schema_answer(raw, schema)
        return answer, _chose(answer)
