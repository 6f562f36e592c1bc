"""The desk's answer composer: the wording of its answers, from its configuration (its tables, documents and tools;
the built-in desk's ``[answers]`` keep the spec's sentences). The Respond node (:mod:`.respond`) streams what it
composes and gives the model its system prompt (:meth:`DeskAnswers.system_prompt`).

Offline, :meth:`DeskAnswers.compose` builds the answer from the evidence only: the asked-for columns of a row
(``Order 1042: status is open.``), a list of rows named by their name column or id, a count, the best knowledge
chunk quoted with its source file, a tool's result; and on the LLM route what the desk can do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from routegate.apps.configured.config import TEMPLATE_FIELD, DeskConfig, TableConfig, template_fields
from routegate.apps.configured.words import fact, is_id

_GREETING: Final = re.compile(r"^\s*(hi|hello|hey|helo|good (morning|afternoon|evening))\b", re.IGNORECASE)
_THANKS: Final = re.compile(r"\b(thanks?|thank you|thnks|cheers)\b", re.IGNORECASE)
_BYE: Final = re.compile(r"\b(bye|goodbye|see you)\b", re.IGNORECASE)
MAX_LISTED: Final = 20
MAX_QUOTED_CHARS: Final = 16_000
"""What an offline answer quotes of a tool's answer, at most (the rest is left out, and the answer says so)."""


class DeskAnswers:
    """The desk's wording: its capabilities and how rows are named, from the configuration."""

    def __init__(self, config: DeskConfig) -> None:
        self.config = config
        self.tables = {t.name: t for t in config.tables}
        self.tools = {t.name: t for t in config.tools}
        parts: list[str] = []
        if config.tables:
            parts.append("look up " + _joined([t.plural for t in config.tables]))
        if any(r.kind == "kb" for r in config.routes):
            parts.append("answer from our help documents")
        if config.tools:
            parts.append("call " + _joined([t.description for t in config.tools]))
        example = next((r.examples[0] for r in config.routes if r.kind == "sql" and r.examples), None)
        hint = f" (for example “{example}”)" if example else ""
        self.wording = config.answers
        self.capabilities = (
            self.wording.capabilities or f"I'm the {config.desk.name} desk assistant. I can {_joined(parts)}{hint}."
        )

    def unsure(self) -> str:
        if self.wording.unsure is not None:
            return _filled(self.wording.unsure, {"capabilities": self.capabilities})
        return (
            "I'm not sure what you're asking, so I haven't looked anything up. " + self.capabilities + " Could you "
            "ask again in your own words (for example with an order number or a name)?"
        )

    def llm_route(self, message: str) -> str:
        if _THANKS.search(message):
            return "You're welcome! Is there anything else I can help you with?"
        if _BYE.search(message):
            return "Goodbye! Come back any time you need help."
        if _GREETING.search(message):
            return "Hello! " + self.capabilities + " What can I do for you?"
        return self.capabilities + " What would you like to know?"

    # -- rows ------------------------------------------------------------------------------------------------
    def _name(self, table: TableConfig | None, row: Mapping[str, Any]) -> str:
        if table is None:
            return "This row"
        ident = row.get(table.primary_key) if table.primary_key else None
        label = table.label.capitalize()
        if table.name_column and row.get(table.name_column) is not None:
            return f"{row[table.name_column]}" + (f" ({table.label} {ident})" if ident is not None else "")
        return f"{label} {ident}" if ident is not None else label

    def _joined(self, table: TableConfig | None, row: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The names the row carries of the rows it links to (``customer``: ``Maria Garcia``, joined along its
        foreign keys): said instead of the linking ids."""
        if table is None:
            return []
        out: list[tuple[str, str]] = []
        for fk in table.foreign_keys:
            parent = self.tables.get(fk.references)
            key = parent.label.replace(" ", "_") if parent is not None else None
            # a column of the table's own by that name is not a joined name
            if parent is not None and key is not None and key not in table.columns and row.get(key) is not None:
                out.append((parent.label, str(row[key])))
        return out

    def _told(self, table: TableConfig | None, row: Mapping[str, Any], joined: Sequence[tuple[str, str]]) -> list[str]:
        """The columns a row's answer says when the question asked for none: not its name (it leads), not the ids
        that only link rows (its key, its foreign keys, ``*_id``), not the joined names (said with the name), not
        the empty ones."""
        hidden = {label.replace(" ", "_") for label, _ in joined}
        if table is not None:
            hidden |= {table.name_column or "", table.primary_key or "", *(fk.column for fk in table.foreign_keys)}
        return [c for c in row if c not in hidden and not is_id(c) and row[c] is not None]

    def rows(self, call: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
        table = self.tables.get(str(call.get("table")))
        focus = [c for c in call.get("focus") or () if isinstance(c, str)]
        plural = table.plural if table else "rows"
        label = table.label if table else "row"
        if call.get("template") == "count" and rows and self.wording.count is not None:
            counted_rows = self.config.lists_counts  # the rows counted were read, not count(*)
            n = len(rows) if counted_rows else rows[0]["count"]
            lines = "\n".join(self._lines(table, rows, focus)) if counted_rows else ""
            values = {
                "count": n,
                "label": label,
                "plural": plural,
                "looked_for": call.get("looked_for"),
                "lines": lines,
            }
            return _filled(self.wording.count, values)
        if call.get("template") == "count" and rows and "count" in rows[0]:
            n = rows[0]["count"]
            counted = f"is {n} {label}" if n == 1 else f"are {n} {plural}"
            return f"There {counted} ({call.get('looked_for') or plural})."
        if len(rows) == 1 and call.get("template") == "parent":
            row = rows[0]
            facts = ", ".join(f"{c.replace('_', ' ')} {_text(row[c])}" for c in focus if c in row)
            lead = str(call.get("looked_for") or "It").capitalize()
            return f"{lead}: {self._name(table, row)}" + (f" ({facts})." if facts else ".")
        if len(rows) == 1:
            row = rows[0]
            if table is not None and (worded := _worded(table.row, row, focus)) is not None:
                return worded
            if asked := [c for c in focus if c in row]:
                facts = ", ".join(f"{c.replace('_', ' ')} is {_text(row[c])}" for c in asked)
                return f"{self._name(table, row)}: {facts}."
            joined = self._joined(table, row)
            lead = ", ".join([self._name(table, row), *(f"{label} {name}" for label, name in joined)])
            told = [fact(c, _text(row[c])) for c in self._told(table, row, joined)]
            return f"{lead}: {', '.join(told)}." if told else f"{lead}."
        return f"I found {len(rows)} {plural}:\n" + "\n".join(self._lines(table, rows, focus))

    def _lines(self, table: TableConfig | None, rows: Sequence[Mapping[str, Any]], focus: Sequence[str]) -> list[str]:
        """One ``- `` line per row (at most :data:`MAX_LISTED`, then how many more)."""
        lines = []
        for row in rows[:MAX_LISTED]:
            if table is not None and (worded := _worded(table.line, row, focus)) is not None:
                lines.append(f"- {worded}")
                continue
            if asked := [c for c in focus if c in row]:
                shown = [f"{c.replace('_', ' ')} {_text(row[c])}" for c in asked]
            else:
                joined = self._joined(table, row)
                told = [f"{c.replace('_', ' ')} {_text(row[c])}" for c in self._told(table, row, joined)]
                shown = [f"{label} {name}" for label, name in joined] + told
            lines.append(f"- {self._name(table, row)}: " + ", ".join(shown))
        if len(rows) > MAX_LISTED:
            lines.append(f"(and {len(rows) - MAX_LISTED} more)")
        return lines

    def fallback(self, route: str, reason: str, call: Mapping[str, Any] | None) -> str:
        if (failed := model_failed_answer(reason)) is not None:
            return failed
        wording = self.wording
        if route == "POSTGRES":
            if reason == "empty":
                what = str((call or {}).get("looked_for") or "a matching record")
                named = (call or {}).get("named")
                if wording.not_found_name is not None and isinstance(named, dict):
                    return _filled(wording.not_found_name, {**named, "looked_for": what})
                if wording.not_found is not None:
                    return _filled(wording.not_found, {"looked_for": what})
                return f"I couldn't find {what} in our records. Please check the number or the name and try again."
            if reason == "unknown_query":
                return (
                    "I couldn't tell which records you mean. Please name the "
                    + _joined([t.label for t in self.config.tables], "or")
                    + " (with its number or name)."
                )
            return wording.records_unavailable or (
                "I couldn't look that up in the database just now. Please try again, or ask with a number or a name."
            )
        if route == "VECTOR":
            if reason == "empty":
                return wording.kb_not_found or "I couldn't find anything about that in our help documents."
            return (
                wording.kb_unavailable or "I couldn't search the help documents just now. Please try again in a moment."
            )
        if route == "EXTERNAL":
            if reason == "empty":  # a route's not_covered: the tools have nothing on it
                return wording.tool_empty or (
                    "I don't have that information: my tools only know "
                    + _joined([t.description for t in self.config.tools])
                    + "."
                )
            if reason == "unknown_query":
                return wording.tool_unknown or (
                    "I couldn't tell what to ask the external service; please include the number or name it needs."
                )
            return wording.tool_unavailable or "The external service did not answer just now. Please try again later."
        return self.capabilities

    def compose(self, message: str, route: str, observation: Mapping[str, Any], *, unsure: bool = False) -> str:
        fallback = observation.get("fallback")
        call = observation.get("call")
        result = observation.get("result")
        if isinstance(fallback, str) and fallback:
            return self.fallback(route, fallback, call if isinstance(call, Mapping) else None)
        if route == "POSTGRES" and isinstance(result, Mapping) and isinstance(call, Mapping):
            return self.rows(call, result.get("rows") or []) + truncation_note(result)
        if route == "VECTOR" and isinstance(result, Mapping):
            documents = result.get("documents") or []
            top = documents[0]
            answer = _filled(self.wording.kb_quote, top)
            others = [d for d in documents[1:] if d["source"] != top["source"]]
            related = {d["source"]: d["title"] for d in others}  # one per file, in rank order
            if related:
                sources = ", ".join(related)
                titles = ", ".join(f"“{t}”" for t in related.values())
                answer += _filled(self.wording.kb_related, {"sources": sources, "titles": titles})
            return answer
        if route == "EXTERNAL" and isinstance(result, Mapping):
            value = result.get("response")
            tool = self.tools.get(str(result.get("tool")))
            if tool is not None and tool.answer is not None and isinstance(value, Mapping):
                return _filled(tool.answer, value)
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            cut: Mapping[str, Any] = result
            if len(text) > MAX_QUOTED_CHARS:  # an answer is stored in the conversation's memory: it stays short
                text = text[:MAX_QUOTED_CHARS]
                cut = {"truncated": True, "truncation": f"its first {MAX_QUOTED_CHARS} characters are quoted"}
            mock = " (mock response)" if result.get("mock") else ""
            return f"{result.get('tool')}: {text}{mock}" + truncation_note(cut)
        return self.unsure() if unsure else self.llm_route(message)

    def system_prompt(self) -> str:
        return (
            f"You are the assistant of {self.config.desk.description or self.config.desk.name}. Answer the user's last "
            "message in a few sentences using ONLY the evidence given (database rows, document passages with their "
            "source file, or a tool's result) and the conversation. Name the source file when you quote a document. "
            "If the evidence is empty or a tool failed, say plainly what you could not find; never invent records, "
            f"numbers or policies. On the LLM route (no evidence) answer briefly and say what you can do: {self.capabilities}"
        )


def model_failed_answer(reason: str) -> str | None:
    """The answer to a turn whose fallback ``reason`` says the language model failed before any tool ran
    (``llm_failed:<stop>``): it says so, and never blames the database or the documents; else ``None``."""
    if not reason.startswith("llm_failed:"):
        return None
    return (
        f"I couldn't answer that: the language model service failed ({reason.removeprefix('llm_failed:')}), "
        "so nothing was looked up. Please try again later."
    )


def truncation_note(result: Mapping[str, Any]) -> str:
    """A line saying the result is not whole, when a bound of the SQL tool cut it; else empty."""
    if not result.get("truncated"):
        return ""
    return f"\n(This is not the whole result: {result.get('truncation') or 'it was cut'}.)"


def _filled(template: str, response: Mapping[str, Any]) -> str:
    """A tool's ``answer`` template with ``{field}`` replaced by the response's top-level field (no other
    formatting: a field's value is never read as a template)."""
    return TEMPLATE_FIELD.sub(lambda m: _text(response.get(m.group(1))), template)


def _worded(templates: Sequence[str], row: Mapping[str, Any], focus: Sequence[str]) -> str | None:
    """The first template that names every column the question asked about and whose every field the row has
    (not null), filled in; ``None`` when none does (the desk's own wording then)."""
    for template in templates:
        fields = set(template_fields(template))
        if all(c in fields for c in focus) and all(row.get(f) is not None for f in fields):
            return _filled(template, row)
    return None


def _text(value: object) -> str:
    return "unknown" if value is None else str(value)


def _joined(items: Sequence[str], word: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]
