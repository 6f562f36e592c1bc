"""A weak routing model for :class:`~routegate.testing.ScriptedOpenAIServer`: it knows the right route, and in a
set share of its answers it misspells an argument's name or wraps its JSON in prose — in whichever output format
the request asks for, as far as that format lets it.

Use it as the server's ``fallback`` (or as steps): ``ScriptedOpenAIServer(fallback=WeakModel(answer, misspell=0.2,
prose=0.1))``. ``answer`` maps the router's goal (the ``goal`` of the request's JSON payload) to the route and its
arguments. Which answers go wrong depends only on ``seed`` and the goal, so every mode meets the same faults on the
same questions.

``constrained`` names the formats the served model is held to by constrained decoding (vLLM's and llama.cpp's
grammars, OpenAI's JSON and strict modes): a tool call or a strict schema's answer then fits its schema (no fault
can happen), and a ``json`` (``json_object``) answer is JSON — but of any shape, so a misspelt name stays possible.
Outside it a tool call can carry a misspelt argument, and "prose" becomes an answer in text without the tool call
(what a model that ignores ``tool_choice`` does); a JSON answer can carry either fault.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from routegate.testing.steps import RecordedRequest, Reply, ServerStep, ToolCallReply

Fault = Literal["misspell", "prose"]


def misspelt(name: str) -> str:
    """``name`` with its second and third letters swapped (``query`` -> ``qeury``); short names get a ``_``."""
    if len(name) < 3 or name[1] == name[2]:
        return name + "_"
    return name[0] + name[2] + name[1] + name[3:]


@dataclass(frozen=True, slots=True)
class WeakModel:
    """A responder (``RecordedRequest -> ServerStep``) playing a model that routes right but is sloppy in form.

    ``misspell`` and ``prose`` are shares of the questions (0..1, together at most 1); ``seed`` picks which.
    """

    answer: Callable[[str], tuple[str, Mapping[str, Any]]]
    misspell: float = 0.0
    prose: float = 0.0
    seed: int = 0
    constrained: Collection[str] = ("json", "tools", "json_schema")

    def __post_init__(self) -> None:
        if not (0.0 <= self.misspell <= 1.0 and 0.0 <= self.prose <= 1.0 and self.misspell + self.prose <= 1.0):
            raise ValueError(
                f"misspell and prose are shares in 0..1 summing to at most 1, got {self.misspell}, {self.prose}"
            )

    def fault(self, goal: str) -> Fault | None:
        """The fault this model makes on ``goal`` (the same whatever the format asked for)."""
        digest = hashlib.sha256(f"{self.seed}\x00{goal}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        if draw < self.misspell:
            return "misspell"
        if draw < self.misspell + self.prose:
            return "prose"
        return None

    def __call__(self, request: RecordedRequest) -> ServerStep:
        goal = _goal(request)
        target, args = self.answer(goal)
        mode = request.output_mode
        fault = self.fault(goal)
        if mode in self.constrained and (mode == "json" or _strict(request, mode)):
            # held to the format: a strict schema or a tool call fits it; a JSON object is JSON, of any shape
            fault = "misspell" if mode == "json" and fault == "misspell" else None
        arguments = dict(args)
        if fault == "misspell" and arguments:
            first = next(iter(arguments))
            arguments = {misspelt(first) if k == first else k: v for k, v in arguments.items()}
        if mode == "tools":
            names = request.tool_names
            name = target if target in names else (names[0] if names else target)
            if fault == "prose":  # no tool call: the route told in words, with its JSON
                text = json.dumps({"kind": "route", "target": name, "args": arguments})
                return Reply(f"I would send this to {name}. {text}")
            return ToolCallReply(((name, arguments),))
        route: dict[str, Any] = {"kind": "route", "target": target, "args": arguments}
        wrapped = _schema_wraps(request)
        text = json.dumps({wrapped: route} if wrapped else route)
        if fault == "prose":
            text = f"Sure! Here is the route you asked for:\n{text}\nLet me know if you need anything else."
        return Reply(text)


def _goal(request: RecordedRequest) -> str:
    text = request.content("user") or ""
    try:
        payload = json.loads(text)
    except ValueError:
        return text
    goal = payload.get("goal") if isinstance(payload, dict) else None
    return goal if isinstance(goal, str) else text


def _strict(request: RecordedRequest, mode: str) -> bool:
    """A schema the server was asked to hold the answer to strictly (tool calls with ``tool_choice`` are)."""
    if mode == "text":
        return False
    if mode != "json_schema":
        return True
    schema = request.json_schema or {}
    return schema.get("strict") is True


def _schema_wraps(request: RecordedRequest) -> str | None:
    """The one property a JSON schema wraps the route in (``{"route": {...}}``), if it does."""
    schema = (request.json_schema or {}).get("schema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and len(properties) == 1:
        return str(next(iter(properties)))
    return None
