"""OpenAI's strict mode for JSON schemas: a schema made strict, and an answer to it read back.

Strict mode (``"strict": true`` on a ``json_schema`` response format or a function tool) holds the model to the
schema by constrained decoding, but takes a subset of JSON Schema: every object closed and every property required,
no ``$ref`` outside the root, a short list of keywords. :func:`strict_schema` writes a schema in that subset (or
says what it cannot express); :func:`without_strict_nulls` undoes the one encoding it forces, ``null`` for an absent
optional property.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
