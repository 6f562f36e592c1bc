"""A route catalogue put to a model as function tools or as one strict JSON schema, and the model's answer read
back as route intents.

* :func:`route_tools` — one function tool per route the attempt may take (forbidden targets left out); the tool's
  parameters are the route's argument schema, the one the policy checks. Route names that are not valid tool names
  (``^[A-Za-z0-9_-]{1,64}$``) are given one, mapped back when the call is read.
* :func:`route_intents` — a reply's tool calls as route intents ``{"kind": "route", "target", "args"}``: what a
  router returns as its decision, and what an agent that takes several calls at once would check one by one.
* :func:`route_schema` — one strict schema for the whole catalogue: ``{"route": <one of the routes>}``, each route
  an object with its own ``target`` and its arguments made strict (:func:`strict_schema`); :func:`schema_answer`
  reads the answer back.

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
from routegate.llm.structured import SchemaFormat, ToolCall, ToolsFormat, ToolSpec

TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCHEMA_NAME: Final = "route"
_DROPPED: Final = frozenset(
    {
        "title", "default", "examples", "$schema", "$id", "$comment", "minLength", "maxLength", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
        "uniqueItems", "minProperties", "maxProperties", "readOnly", "writeOnly", "deprecated", "contentEncoding",
        "contentMediaType", "discriminator",
    }
)  # fmt: skip
_UNSUPPORTED: Final = frozenset(
    {
        "not", "if", "then", "else", "patternProperties", "dependentSchemas", "dependentRequired", "propertyNames",
        "unevaluatedProperties", "unevaluatedItems", "contains", "prefixItems", "additionalItems",
    }
)  # fmt: skip
_MAX_DEPTH: Final = 32


class StrictSchemaError(ValueError):
    """A schema that strict mode cannot express (a free-form object, ``not``, a recursive reference...): the
    message names the part."""


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


# -- strict mode ----------------------------------------------------------------------------------------------
def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` in the subset OpenAI's strict mode takes: every object closed (``additionalProperties: false``)
    with every property required (optional ones made nullable), ``$ref`` inlined, ``oneOf`` as ``anyOf``, and the
    validation keywords strict mode refuses (lengths, patterns, bounds, formats) left out — the policy checks them
    on the answer. Raises :class:`StrictSchemaError` for what it cannot express: an open object
    (``additionalProperties`` true or a schema), ``not`` / ``if`` and their kind, several ``allOf`` parts, a
    recursive ``$ref``, a value without a type."""
    defs = _defs(schema)
    return _strict(schema, defs, (), 0, "args")


def _defs(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    found: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        value = schema.get(key)
        if isinstance(value, Mapping):
            found.update(value)
    return found


def _resolved(
    node: Mapping[str, Any], defs: Mapping[str, Any], seen: tuple[str, ...], where: str
) -> tuple[Mapping[str, Any], tuple[str, ...]]:
    while True:
        ref = node.get("$ref")
        if ref is not None:
            name = (
                ref.rsplit("/", 1)[-1]
                if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))
                else None
            )
            if name is None or not isinstance(defs.get(name), Mapping):
                raise StrictSchemaError(f"{where}: reference {ref!r} is not to a local definition")
            if name in seen:
                raise StrictSchemaError(f"{where}: recursive reference {ref!r}")
            seen = (*seen, name)
            node = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
            continue
        parts = node.get("allOf")
        if parts is not None:
            if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], Mapping):
                raise StrictSchemaError(f"{where}: allOf with {len(parts) if isinstance(parts, list) else '?'} parts")
            node = {**parts[0], **{k: v for k, v in node.items() if k != "allOf"}}
            continue
        return node, seen


def _strict(node: object, defs: Mapping[str, Any], seen: tuple[str, ...], depth: int, where: str) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        raise StrictSchemaError(f"{where}: a schema must be an object, got {type(node).__name__}")
    if depth > _MAX_DEPTH:
        raise StrictSchemaError(f"{where}: nested deeper than {_MAX_DEPTH} levels")
    node, seen = _resolved(node, defs, seen, where)
    unsupported = sorted(_UNSUPPORTED & node.keys())
    if unsupported:
        raise StrictSchemaError(f"{where}: {', '.join(unsupported)} has no strict form")
    out: dict[str, Any] = {}
    if isinstance(node.get("description"), str):
        out["description"] = node["description"]
    branches = node.get("anyOf", node.get("oneOf"))
    if branches is not None:
        if not isinstance(branches, list) or not branches:
            raise StrictSchemaError(f"{where}: anyOf / oneOf must be a non-empty list")
        out["anyOf"] = [_strict(b, defs, seen, depth + 1, f"{where}|{i}") for i, b in enumerate(branches)]
        return out
    if "const" in node:
        out["enum"] = [node["const"]]
    elif isinstance(node.get("enum"), list):
        out["enum"] = list(node["enum"])
    kind = node.get("type")
    if kind is None:
        if "enum" in out:
            return out
        raise StrictSchemaError(f"{where}: a value without a type (any JSON) has no strict form")
    kinds = kind if isinstance(kind, list) else [kind]
    out["type"] = kind
    if "object" in kinds:
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            raise StrictSchemaError(f"{where}: an open object (additionalProperties={extra!r}) has no strict form")
        properties = node.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise StrictSchemaError(f"{where}: properties must be an object")
        required = _required(node)
        out["properties"] = {
            str(name): (
                _strict(prop, defs, seen, depth + 1, f"{where}.{name}")
                if name in required
                else _nullable(_strict(prop, defs, seen, depth + 1, f"{where}.{name}"))
            )
            for name, prop in properties.items()
        }
        out["required"] = [str(name) for name in properties]
        out["additionalProperties"] = False
    if "array" in kinds:
        items = node.get("items")
        if not isinstance(items, Mapping):
            raise StrictSchemaError(f"{where}: an array without an items schema has no strict form")
        out["items"] = _strict(items, defs, seen, depth + 1, f"{where}[]")
    return out


def _required(node: Mapping[str, Any]) -> set[str]:
    names = node.get("required")
    return {name for name in names if isinstance(name, str)} if isinstance(names, list) else set()


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts ``null``: how strict mode writes an optional property."""
    if "anyOf" in schema:
        if not any(_accepts_null(b, {}) for b in schema["anyOf"]):
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null":
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        schema["type"] = [*kind, "null"]
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _accepts_null(node: object, defs: Mapping[str, Any]) -> bool:
    if not isinstance(node, Mapping):
        return True
    try:
        node, _ = _resolved(node, defs, (), "")
    except StrictSchemaError:
        return True
    branches = node.get("anyOf", node.get("oneOf"))
    if isinstance(branches, list):
        return any(_accepts_null(b, defs) for b in branches)
    if "enum" in node and isinstance(node["enum"], list):
        return None in node["enum"]
    if "const" in node:
        return node["const"] is None
    kind = node.get("type")
    if kind is None:
        return True
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def without_strict_nulls(value: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` (an answer to :func:`strict_schema` of ``schema``) without the ``null`` of each optional property
    whose own schema does not accept ``null``: strict mode's way of writing "absent", undone. Nothing else is
    touched."""
    defs = _defs(schema)
    cleaned = _cleaned(value, schema, defs, 0)
    return cleaned if isinstance(cleaned, dict) else dict(value)


def _cleaned(value: object, node: object, defs: Mapping[str, Any], depth: int) -> object:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return value
    try:
        node, _ = _resolved(node, defs, (), "")
    except StrictSchemaError:
        return value
    if isinstance(value, dict):
        properties = node.get("properties")
        if not isinstance(properties, Mapping):
            return value
        required = _required(node)
        out = {}
        for key, item in value.items():
            prop = properties.get(key)
            if item is None and key not in required and prop is not None and not _accepts_null(prop, defs):
                continue
            out[key] = _cleaned(item, prop, defs, depth + 1) if prop is not None else item
        return out
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        return [_cleaned(item, node["items"], defs, depth + 1) for item in value]
    return value
