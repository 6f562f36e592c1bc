"""A route catalogue put to a model as function tools or as one strict JSON schema, and the model's answer read
back as route intents.

* :func:`route_tools` — one function tool per route the attempt may take (forbidden targets left out); the tool's
  parameters are the route's argument schema, the one the policy checks. Route names that are not valid tool names
  (``^[A-Za-z0-9_-]{1,64}$``) are given one, mapped back when the call is read.
* :func:`route_intents` — a reply's tool calls as route intents ``{"kind": "route", "target", "args"}``: what a
  router returns as its decision, and what an agent that takes several calls at once would check one by one.
* :func:`route_schema` — one strict schema for the whole catalogue: ``{"route": <one of the routes>}``, each route
  an object with its own ``target`` and its arguments made strict (:func:`routegate.llm.strict.strict_schema`);
  :func:`schema_answer` reads the answer back.

Everything read back stays untrusted: arguments are parsed, never repaired, and the policy boundary judges the
intent as it judges free JSON (a misspelt name, a forbidden target, an extra key get the same stop reasons). The
one change made is undoing strict mode's own encoding: an optional argument the model had to write as ``null``
is dropped again when the route's schema does not accept ``null`` there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate.core.contracts import RouteSpec
from routegate.llm.strict import StrictSchemaError, strict_schema, without_strict_nulls
from routegate.llm.structured import SchemaFormat, ToolCall, ToolsFormat, ToolSpec

TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCHEMA_NAME: Final = "route"


# -- tools ----------------------------------------------------------------------------------------------------
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


# -- one strict schema ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RouteSchema:
    """The response format of one attempt and each route's own argument schema (to read the answer back)."""

    format: SchemaFormat
    args_schemas: Mapping[str, Mapping[str, Any]]


def route_schema(catalog: Sequence[RouteSpec], forbidden: Collection[str] = ()) -> RouteSchema:
    """``{"route": anyOf[one object per route]}`` as a strict response format: each route's object fixes its
    ``target`` and holds its arguments made strict. Raises :class:`StrictSchemaError` naming the route whose
    arguments strict mode cannot express, or when no route is left."""
    branches = []
    originals: dict[str, Mapping[str, Any]] = {}
    for spec in catalog:
        if spec.name in forbidden:
            continue
        try:
            args = strict_schema(spec.args_schema)
        except StrictSchemaError as exc:
            raise StrictSchemaError(f"route {spec.name!r}: {exc}") from exc
        originals[spec.name] = spec.args_schema
        branches.append(
            {
                "type": "object",
                "description": spec.description,
                "properties": {
                    "kind": {"type": "string", "enum": ["route"]},
                    "target": {"type": "string", "enum": [spec.name]},
                    "args": args,
                },
                "required": ["kind", "target", "args"],
                "additionalProperties": False,
            }
        )
    if not branches:
        raise StrictSchemaError("no route is left to choose from")
    schema = {
        "type": "object",
        "properties": {SCHEMA_NAME: {"anyOf": branches}},
        "required": [SCHEMA_NAME],
        "additionalProperties": False,
    }
    return RouteSchema(SchemaFormat(SCHEMA_NAME, schema, strict=True), originals)


def schema_answer(value: dict[str, Any], schema: RouteSchema) -> dict[str, Any]:
    """The route decision in a JSON object answering :func:`route_schema`: the inner object of
    ``{"route": {...}}`` (an object of another shape as it is), with the nulls strict mode made the model write for
    absent optional arguments dropped."""
    inner = value.get(SCHEMA_NAME)
    if value.keys() == {SCHEMA_NAME} and isinstance(inner, dict):
        value = inner
    target, args = value.get("target"), value.get("args")
    original = schema.args_schemas.get(target) if isinstance(target, str) else None
    if original is not None and isinstance(args, dict):
        value = {**value, "args": without_strict_nulls(args, original)}
    return value
