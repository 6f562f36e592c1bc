"""From what ``desk init`` found (tables, documents) to a desk configuration: the tables and columns the SQL
tool may read, one route per table family with example questions made from the real rows, one route for the
knowledge base with questions made from the documents' titles and headings, the LLM route.

A table *family* is a table and the tables named after it (``orders`` and ``order_items``): one route serves them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from routegate.apps.configured.config import DeskConfig
from routegate.apps.configured.documents import Document, chunks_of
from routegate.apps.configured.introspect import Table
from routegate.apps.configured.words import (
    column_question,
    filter_questions,
    is_private,
    name_column,
    plural,
    singular,
)
from routegate.apps.support._stopwords import FUNCTION_WORDS

LLM_EXAMPLES: Final = (
    "hello",
    "hi there",
    "good morning",
    "thanks a lot",
    "thank you, bye",
    "what can you do",
    "who are you",
    "are you a bot",
    "how do you work",
    "tell me a joke",
    "can you help me",
    "I have a question",
    "ok cool",
    "never mind",
)
_STOP: Final = FUNCTION_WORDS | frozenset(["if", "into", "no", "not", "these", "this", "those", "we", "yes"])


def families(tables: Sequence[Table]) -> dict[str, list[str]]:
    """Each family's root table and its members: ``order_items`` joins ``orders`` (its name starts with the root's
    singular and ``_``)."""
    names = [t.name for t in tables]
    roots: dict[str, list[str]] = {}
    for name in names:
        parent = next(
            (other for other in names if other != name and name.startswith(singular(other).replace(" ", "_") + "_")),
            None,
        )
        if parent is None:
            roots.setdefault(name, []).insert(0, name)
        else:
            roots.setdefault(parent, []).append(name)
    return {root: members for root, members in roots.items() if root in names}


def _value(row: Mapping[str, Any], column: str | None) -> str | None:
    if column is None or row.get(column) is None:
        return None
    return str(row[column])


def sql_examples(root: Table, members: Sequence[Table], by_name: Mapping[str, Table]) -> list[str]:
    """Questions about one table family, made from its real rows (the first rows; placeholders when empty)."""
    label = singular(root.name)
    many = plural(label)
    row = root.sample[0] if root.sample else {}
    other = root.sample[1] if len(root.sample) > 1 else row
    key = _value(row, root.primary_key) or "1"
    key2 = _value(other, root.primary_key) or "2"
    named = name_column([(c.name, c.type) for c in root.columns])
    name = _value(row, named)
    out = [f"show {label} {key}", f"details of {label} {key2}", f"how many {many} are there", f"list all {many}"]
    plain = [
        c.name
        for c in root.columns
        if c.name not in (root.primary_key, named) and not c.name.endswith("_id") and not is_private(c.name)
    ]
    if plain:
        out.append(column_question(plain[0], f"{label} {key}"))
        out.append(column_question(plain[-1], f"{label} {key2}"))
    for column, values in list(root.filters.items())[:2]:
        out += filter_questions(column, values[0], many, values[-1])
    if name is not None:
        out.append(f"find the {label} {name}")
        # the names of a few rows, alone and with each readable column: a question naming a row needs no table word
        names = [n for r in root.sample[:4] if (n := _value(r, named)) is not None]
        out += names[:3]
        for index, column in enumerate(plain):
            who = names[index % len(names)] if names else name
            out.append(column_question(column, who))
    for fk in root.foreign_keys:
        parent = singular(fk.references)
        out.append(f"which {parent} does {label} {key} belong to")
    for other_table in by_name.values():
        for fk in other_table.foreign_keys:
            if fk.references == root.name and other_table.name not in [m.name for m in members]:
                who = name or key
                out.append(f"show {plural(singular(other_table.name))} for {label} {who}")
    for member in members:
        if member.name != root.name:
            out.append(f"list the {plural(singular(member.name))} of {label} {key}")
    return list(dict.fromkeys(out))


def kb_examples(documents: Sequence[Document], max_chars: int, limit: int = 16) -> list[str]:
    """Questions made from the documents' titles and section headings."""
    out: list[str] = []
    sentences: list[str] = []
    for document in documents:
        out.append(f"tell me about {document.title.lower()}")
        for chunk in chunks_of(document, max_chars):
            heading = chunk.heading.strip().rstrip("?:.").lower()
            if heading and heading != document.title.lower():
                out.append(f"{heading}?" if heading.split()[0] in ("how", "what", "when", "can", "do") else heading)
            first = re.split(r"(?<=[.!?])\s+", chunk.content)[0]
            if 20 <= len(first) <= 200:
                sentences.append(first)  # what the passage says: questions about it land near it
    return list(dict.fromkeys(out))[:limit] + list(dict.fromkeys(sentences))[:limit]


def kb_keywords(documents: Sequence[Document], taken: set[str], limit: int = 16) -> list[str]:
    """The words of the documents' titles, except table words: the topics the rules send to the knowledge base."""
    counts: Counter[str] = Counter()
    for document in documents:
        for word in re.findall(r"[a-z][a-z-]{3,}", document.title.lower()):
            for form in dict.fromkeys((word, singular(word))):
                if form not in _STOP and form not in taken:
                    counts[form] += 1
    return [word for word, _ in counts.most_common(limit)]


def desk_data(
    name: str,
    *,
    tables: Sequence[Table],
    documents: Sequence[Document],
    database: Mapping[str, Any],
    knowledge_paths: Sequence[str],
    chunk_chars: int = 900,
) -> dict[str, Any]:
    """The configuration as data (what :func:`~.render.render` writes and :class:`DeskConfig` checks)."""
    by_name = {t.name: t for t in tables}
    table_entries: list[dict[str, Any]] = []
    for table in tables:
        columns = [c.name for c in table.columns if not is_private(c.name)]
        label = singular(table.name)
        entry: dict[str, Any] = {
            "name": table.name,
            "label": label,
            "plural": plural(label),
            "primary_key": table.primary_key if table.primary_key in columns else None,
            "name_column": name_column([(c.name, c.type) for c in table.columns if c.name in columns]),
            "columns": columns,
            "types": {c.name: c.type for c in table.columns if c.name in columns},
            "foreign_keys": [
                {"column": fk.column, "references": fk.references, "ref_column": fk.ref_column}
                for fk in table.foreign_keys
                if fk.column in columns
            ],
            "filters": {c: v for c, v in table.filters.items() if c in columns},
        }
        table_entries.append({k: v for k, v in entry.items() if v is not None})
    routes: list[dict[str, Any]] = []
    taken: set[str] = set()
    for root, members in families(tables).items():
        words = [w for m in members for w in (singular(m), plural(singular(m)))]
        taken.update(w for phrase in words for w in phrase.split())
        routes.append(
            {
                "name": root,
                "kind": "sql",
                "tables": members,
                "keywords": list(dict.fromkeys(words)),
                "examples": sql_examples(by_name[root], [by_name[m] for m in members], by_name),
            }
        )
    if documents:
        routes.append(
            {
                "name": "knowledge",
                "kind": "kb",
                "keywords": kb_keywords(documents, taken),
                "examples": kb_examples(documents, chunk_chars),
            }
        )
    routes.append({"name": "chat", "kind": "llm", "examples": list(LLM_EXAMPLES)})
    description = f"the {name} desk: " + ", ".join(t.name for t in tables)
    if documents:
        description += f", and {len(documents)} help document{'s' if len(documents) != 1 else ''}"
    return {
        "desk": {"name": name, "description": description, "version": 1},
        "database": dict(database),
        "tables": table_entries,
        "knowledge": {"paths": list(knowledge_paths), "chunk_chars": chunk_chars},  # min_score: calibrated
        "tools": [],
        "router": {"min_score": 0.40, "min_margin": 0.04},
        "routes": routes,
    }


def check_data(data: Mapping[str, Any]) -> DeskConfig:
    return DeskConfig.model_validate(data)
