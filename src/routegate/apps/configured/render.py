"""The configuration as TOML a person reads and edits: every section opens with a comment saying what it is and
what editing it does (``docs/desk.md`` documents each field)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_HEADER = """\
# A routegate desk: routes, readable tables, knowledge sources and tools.
# Written by `routegate desk init`; edit it freely, then run `routegate ask --desk DIR "..."`.
# Every field is documented in docs/desk.md. Anything not listed here is denied: the SQL tool reads only the
# [[tables]] below and only their `columns`.
"""

_COMMENTS: Mapping[str, str] = {
    "desk": "# The desk's name (its database schema is desk_<name>) and what it is for (said on the chat route).",
    "database": (
        '# Where the tables are. source = "sql": sql_file is loaded into the embedded PostgreSQL, in `schema`, on\n'
        '# first start. source = "url": the tables are read in `schema` of the PostgreSQL given by DATABASE_URL.'
    ),
    "tables": (
        "# One [[tables]] per readable table. `columns`: the only columns the SQL tool may read (remove what must stay\n"
        "# private). label/plural: the words questions use. name_column: the column a row is named by. filters:\n"
        '# values a question may name ("how many orders are open?"). primary_key/foreign_keys: from the catalog.'
    ),
    "knowledge": (
        "# The documents of the knowledge base (Markdown, text, HTML; folders are searched recursively), cut into\n"
        "# chunks of at most chunk_chars characters, found by meaning and by words (language: the text-search\n"
        "# configuration). The score cut-off is calibrated from the documents at ingest; min_score = 0.35 fixes it."
    ),
    "router": (
        "# The embedding layer: a message whose best route scores under min_score (cosine similarity to that route's\n"
        "# examples) goes to the llm route; one within min_margin of the runner-up gets a clarifying question."
    ),
    "tools": (
        "# HTTP and MCP tools, each a route target. Example:\n"
        "# [[tools]]\n"
        '# name = "shipping_status"\n'
        '# description = "where a parcel is, by tracking number"\n'
        '# method = "GET"\n'
        '# url = "https://carrier.example/track/{tracking}"\n'
        '# args = { tracking = "string" }\n'
        '# mock = { status = "in transit" }   # answered offline instead of calling the URL\n'
        "# An MCP tool names a server instead of a URL (its arguments are checked against the tool's inputSchema):\n"
        "# [[mcp_servers]]\n"
        '# name = "inventory"\n'
        '# command = "python"\n'
        '# args = ["inventory_server.py"]\n'
        "# [[tools]]\n"
        '# name = "stock"\n'
        '# description = "how many of a product are in stock"\n'
        '# mcp_server = "inventory"\n'
        '# args = { product_id = "integer" }'
    ),
    "routes": (
        "# The routes the router chooses between: kind = sql (tables), kb (the knowledge base), tool (target = a\n"
        "# tool), llm (answered directly; needed once). keywords: words that settle the route on their own.\n"
        "# examples: questions the embedding layer learns the route from; add your own."
    ),
}


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _long_list(key: str, values: list[Any]) -> str:
    one_line = f"{key} = {_value(values)}"
    if len(one_line) <= 116:
        return one_line
    return f"{key} = [\n" + "".join(f"  {_value(v)},\n" for v in values) + "]"


def _body(entry: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in entry.items():
        if value is None or (isinstance(value, list | dict) and not value and key != "paths"):
            continue
        if isinstance(value, list) and value and isinstance(value[0], Mapping):
            continue  # arrays of tables are written after the plain keys
        lines.append(_long_list(key, value) if isinstance(value, list) else f"{_key(key)} = {_value(value)}")
    return lines


def render(data: Mapping[str, Any]) -> str:
    out = [_HEADER]
    for section in ("desk", "database", "knowledge", "router"):
        out += [_COMMENTS[section], f"[{section}]", *_body(data[section]), ""]
    for section in ("tables", "tools", "routes"):
        out.append(_COMMENTS[section])
        for entry in data.get(section, []):
            out += [f"[[{section}]]", *_body(entry)]
            for key, value in entry.items():
                if isinstance(value, list) and value and isinstance(value[0], Mapping):
                    for item in value:
                        out += [f"[[{section}.{key}]]", *_body(item)]
            out.append("")
        if not data.get(section):
            out.append("")
    return "\n".join(out).rstrip() + "\n"
