"""A route catalogue put to a model as function tools, and a reply's tool calls read back as route intents.

* :func:`route_tools` — one function tool per route an attempt may take (forbidden targets left out); the tool's
  parameters are the route's argument schema, the one the policy checks. Route names that are not valid tool names
  (``^[A-Za-z0-9_-]{1,64}$``) are given one, mapped back when the call is read.
* :func:`route_intents` — a reply's tool calls as route intents ``{"kind": "route", "target", "args"}``: what a
  router returns as its decision, and what a tool agent checks one by one.

Everything read back stays untrusted: arguments are parsed, never repaired, and the policy boundary judges the
intent as it judges free JSON. The LLM router (:mod:`routegate.routers.llm`) and the tool agent
(:class:`routegate.plan.ToolAgent`) both ask through these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate.core.contracts import RouteSpec
from routegate.llm.structured import ToolCall, ToolsFormat, ToolSpec

TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class RouteTools:
    """The tools of one attempt and, for each tool name, the route it stands for."""

    format: ToolsFormat
    targets: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.format.tools)


def tool_name(target: str, taken: Collection[str] = ()) -> str:
    """``target`` as a tool name: itself when valid, else its invalid characters as ``_`` (cut to 64), with a
    numbered suffix when that name is ``taken``."""
    base = target if TOOL_NAME.match(target) else (re.sub(r"[^A-Za-z0-9_-]", "_", target)[:64] or "route")
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: 64 - len(suffix)] + suffix
    return name


def route_tools(catalog: Sequence[RouteSpec], forbidden: Collection[str] = ()) -> RouteTools:
    """Each route of ``catalog`` but the ``forbidden`` ones as a function tool (``tool_choice="required"``)."""
    tools: list[ToolSpec] = []
    targets: dict[str, str] = {}
    for spec in catalog:
        if spec.name in forbidden:
            continue
        name = tool_name(spec.name, targets)
        targets[name] = spec.name
        tools.append(ToolSpec(name, spec.description, dict(spec.args_schema)))
    return RouteTools(ToolsFormat(tuple(tools), choice="required"), targets)


def route_intents(calls: Sequence[ToolCall], targets: Mapping[str, str] | RouteTools) -> list[dict[str, Any]]:
    """The route intents of a reply's tool calls, in order: ``{"kind": "route", "target", "args"}`` each, the
    target the route the tool stands for (an unknown tool's name as it is: the policy refuses it), the args the
    parsed arguments (the text itself when it is not JSON: the policy refuses it with ``invalid_route:bad_args``;
    empty arguments are ``{}``). Untrusted: pass each through the policy boundary."""
    names = targets.targets if isinstance(targets, RouteTools) else targets
    intents = []
    for call in calls:
        args: object
        if not call.arguments.strip():
            args = {}
        else:
            try:
                args = json.loads(call.arguments)
            except (ValueError, RecursionError):
                args = call.arguments
        intents.append({"kind": "route", "target": names.get(call.name, call.name), "args": args})
    return intents


__all__ = ["TOOL_NAME", "RouteTools", "route_intents", "route_tools", "tool_name"]
