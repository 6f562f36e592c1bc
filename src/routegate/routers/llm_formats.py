"""A route catalogue put to a model as function tools or as one strict JSON schema, and the model's answer read
back as route intents.

* :func:`route_tools` — one function tool per route the attempt may take (forbidden targets left out), and
  :func:`route_intents` — a reply's tool calls as route intents: defined in :mod:`routegate.llm.route_tools` (the
  tool agent, a layer below the routers, asks through them too) and named here as well.
* :func:`route_schema` — one strict schema for the whole catalogue: ``{"route": <one of the routes>}``, each route
  an object with its own ``target`` and its arguments made strict (:func:`routegate.llm.strict.strict_schema`);
  :func:`schema_answer` reads the answer back.

Everything read back stays untrusted: arguments are parsed, never repaired, and the policy boundary judges the
intent as it judges free JSON (a misspelt name, a forbidden target, an extra key get the same stop reasons). The
one change made is undoing strict mode's own encoding: an optional argument the model had to write as ``null``
is dropped again when the route's schema does not accept ``null`` there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate.core.contracts import RouteSpec
from routegate.llm.route_tools import TOOL_NAME, RouteTools, route_intents, route_tools, tool_name
from routegate.llm.strict import StrictSchemaError, strict_schema, without_strict_nulls
from routegate.llm.structured import SchemaFormat

SCHEMA_NAME: Final = "route"


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


__all__ = [
    "SCHEMA_NAME",
    "TOOL_NAME",
    "RouteSchema",
    "RouteTools",
    "route_intents",
    "route_schema",
    "route_tools",
    "schema_answer",
    "tool_name",
]
