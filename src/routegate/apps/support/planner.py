"""Offline SQL for any configured schema: a question becomes a parameterised SELECT built from the tables'
configuration — never from the question's text. The question only picks the tables, the columns and the values.

What it answers (every query then goes through the SQL guard with the desk's allowlist):

* a row by id — ``what is the status of order 1042?`` (``<label> <number>``);
* a row by its name column — ``which country is Maria Garcia from?`` (capitalised words, or the words after the
  table's label: ``customer maria``);
* along a foreign key, to the parent — ``who placed order 1042?`` (``who`` or the parent's label) — and to the
  children — ``show orders for customer Maria`` (a table that references the named one);
* counts and simple filters — ``how many orders are open?`` (the configured ``filters`` values);
* a row left out of the children — ``the tickets of customer 1 other than ticket 1`` (``other than`` / ``except``
  / ``besides`` / ``apart from`` / ``but not`` before a row's id);
* a follow-up that names nothing — ``and which city is she from?`` — takes the entity of the latest earlier
  message that had one.

A name may belong to any table with a name column: :func:`plan_sql` returns the alternatives in order (the
tables the question mentions first), and the tool runs them until one finds rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any, Final

from routegate.apps.configured.config import DeskConfig, TableConfig
from routegate.apps.configured.words import words_of
from routegate.apps.support._stopwords import REQUEST_WORDS
from routegate.apps.support.rules import correct_typos

_COUNT: Final = re.compile(r"\b(?:how many|count|number of)\b")
_WHO: Final = re.compile(r"\b(?:who|whose|which (?:person|user|client|buyer))\b")
_STOP: Final = REQUEST_WORDS | frozenset(
    [
        "also",
        "bought",
        "buy",
        "check",
        "could",
        "count",
        "hello",
        "hi",
        "live",
        "lives",
        "located",
        "made",
        "names",
        "no",
        "ok",
        "ordered",
        "place",
        "placed",
        "pull",
        "thanks",
        "this",
        "yes",
    ]
)


def _words(phrase: str) -> re.Pattern[str]:
    """A pattern that finds ``phrase`` in a lower-cased question as whole words."""
    return re.compile(r"\b" + re.escape(phrase.lower()) + r"\b")


_SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = {
    "cost": ("price", "total", "amount"),
    "costs": ("price", "total", "amount"),
    "how much": ("price", "total", "amount"),
    "expensive": ("price",),
    "cheap": ("price",),
    "where": ("city", "country", "address"),
    "live": ("city", "country", "address"),
    "lives": ("city", "country", "address"),
    "based": ("city", "country"),
    "in stock": ("stock",),
    "left": ("stock",),
    "available": ("stock",),
    "when": ("ordered_on", "created_at", "date", "shipped_at"),
    "mail": ("email",),
    "contact": ("email", "phone"),
    "tracking": ("tracking_number",),
}
_SYNONYM_PATTERNS: Final = tuple((_words(phrase), columns) for phrase, columns in _SYNONYMS.items())
"""Each synonym as the pattern that finds it in a question, compiled once."""
_TEXT: Final = frozenset({"text", "character varying", "citext"})
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z'’.-]*")
_TOKEN: Final = re.compile(r"[A-Za-z]+")
_ID_AFTER: Final = re.compile(r"\s*(?:with (?:the )?)?(?:#|no\.?|number|id|nr\.?)?\s*#?(\d{1,12})\b")
"""A row's id after its table's word: ``order 1042``, ``order #1042``, ``customer with id 3``."""
_EXCEPT: Final = re.compile(r"\b(?:other than|except|besides|apart from|but not)\s+$")
"""What, just before a row's id, leaves that row out: ``tickets of customer 1 other than ticket 1``."""
_INTRODUCERS: Final = frozenset({"named", "called", "for", "of", "by"})
"""Words after which a lower-case word is read as a name (``tickets for jane smith``)."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """One offline query: what it looks for (for the answer), the table its rows come from, the columns the
    question asked about, the SQL and its parameters."""

    kind: str  # by_id | by_name | parent | children | count | filter | all
    table: str
    query: str
    params: Mapping[str, Any] = field(default_factory=dict)
    focus: tuple[str, ...] = ()
    looked_for: str = ""
    named: tuple[str, str] | None = None
    """The row the question named by its name, ``(its table's label, the name)``: what was not found when nothing is."""

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.kind, "table": self.table, "query": self.query, "params": dict(self.params)}


def _q(name: str) -> str:
    return f'"{name}"'  # identifiers are checked against [a-z_][a-z0-9_]* by the configuration


def _label_pattern(table: TableConfig) -> re.Pattern[str]:
    words = sorted({table.label, table.plural, table.name.replace("_", " "), *table.aliases}, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")


@dataclass(frozen=True, slots=True)
class _Found:
    ids: list[tuple[TableConfig, int]]
    excluded: list[tuple[TableConfig, int]]
    mentioned: list[TableConfig]
    filters: list[tuple[TableConfig, str, str]]
    names: list[str]
    counting: bool
    who: bool
    text: str
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the columns named, per table (once each)


class SqlPlanner:
    """Builds :class:`Lookup` s for one desk's tables (``config.tables``)."""

    def __init__(self, config: DeskConfig) -> None:
        self.tables = list(config.tables)
        self._by_name = {t.name: t for t in self.tables}
        self._labels = [(t, _label_pattern(t)) for t in self.tables]
        self._taken = {w for t in self.tables for phrase in (t.label, t.plural, *t.aliases) for w in phrase.split()}
        self._values = {v.lower() for t in self.tables for vs in t.filters.values() for v in vs}
        self._vocabulary = tuple(word.lower() for word in config.router.typo_words)
        self._lists_counts = config.lists_counts
        # the patterns a question is read with, compiled once: each filter value, each table's column words
        self._filter_words = tuple(
            (table, column, value, _words(value)) for table in self.tables for column, values in table.filters.items()
            for value in values
        )  # fmt: skip
        self._column_words = {t.name: tuple((c, _words(words_of(c))) for c in t.columns) for t in self.tables}
        # a word's correction depends on the word alone: each is worked out once (the last 1024 words)
        self._correct = lru_cache(maxsize=1024)(partial(_correct_word, vocabulary=self._vocabulary))

    def _corrected(self, message: str) -> str:
        """``message`` with the misspellings of ``[router] typo_words`` corrected (``tikcet 2`` → ``ticket 2``), the
        other words as written (a name keeps its capital)."""
        if not self._vocabulary:
            return message

        return _TOKEN.sub(lambda match: self._correct(match.group(0)), message)

    # -- reading the question ------------------------------------------------------------------------------
    def _find(self, message: str) -> _Found:
        text = " ".join(message.lower().replace("’", "'").split())
        ids: list[tuple[TableConfig, int]] = []
        excluded: list[tuple[TableConfig, int]] = []
        spans: list[tuple[int, TableConfig]] = []
        for table, pattern in self._labels:
            for match in pattern.finditer(text):
                spans.append((match.start(), table))
                after = _ID_AFTER.match(text[match.end() :])
                if after and table.primary_key is not None:
                    left_out = _EXCEPT.search(text[: match.start()])
                    (excluded if left_out else ids).append((table, int(after.group(1))))
        # the longest label wins where two overlap ("order item 5" is not "order 5")
        ids = [pair for pair in ids if not any(o is not pair[0] and pair[0].label in o.label for o, _ in ids)]
        mentioned: list[TableConfig] = []
        for _, table in sorted(spans, key=lambda s: s[0]):
            if table not in mentioned and not any(table is not o and table.label in o.label for _, o in spans):
                mentioned.append(table)
        filters = [(table, column, value) for table, column, value, words in self._filter_words if words.search(text)]
        return _Found(
            ids=ids,
            excluded=excluded,
            mentioned=mentioned,
            filters=filters,
            names=self._names(message),
            counting=bool(_COUNT.search(text)),
            who=bool(_WHO.search(text)),
            text=text,
        )

    def _names(self, message: str) -> list[str]:
        """Capitalised runs (not the question's first word when it is a common word) and the words after a name
        table's label or ``named`` / ``called``."""
        words = _WORD.findall(message.replace("’", "'"))
        name_labels = {t.label for t in self.tables if t.name_column is not None}
        names: list[str] = []
        run: list[str] = []

        def close() -> None:
            if run:
                names.append(" ".join(run))
                run.clear()

        for index, raw in enumerate(words):
            word = raw.removesuffix("'s").rstrip(".'")
            lower = word.lower()
            previous = words[index - 1].lower() if index else ""
            introduced = previous in name_labels or previous in _INTRODUCERS
            plain = lower not in _STOP and lower not in self._taken and lower not in self._values and len(word) >= 2
            if plain and (word[:1].isupper() or introduced or (run and lower not in _STOP)):
                run.append(word)
            else:
                close()
        close()
        return [n for n in names if not n.isdigit()]

    def _columns_in(self, table: TableConfig, found: _Found) -> tuple[str, ...]:
        """The columns of ``table`` the question names, by their words or a synonym (read once per question)."""
        known = found.columns.get(table.name)
        if known is None:
            known = found.columns[table.name] = self._columns_of(table, found.text)
        return known

    def _columns_of(self, table: TableConfig, text: str) -> tuple[str, ...]:
        found = [c for c, words in self._column_words[table.name] if words.search(text)]
        for words, columns in _SYNONYM_PATTERNS:
            if words.search(text):
                found += [c for c in columns if c in table.columns]
        return tuple(dict.fromkeys(c for c in found if c != table.primary_key))

    # -- building the queries --------------------------------------------------------------------------------
    def _select(self, table: TableConfig, alias: str) -> tuple[str, str]:
        """The table's readable columns, and the name column of each parent it references (``customer``)."""
        items = [f"{alias}.{_q(c)}" for c in table.columns]
        joins = ""
        for index, fk in enumerate(table.foreign_keys):
            parent = self._by_name.get(fk.references)
            if parent is None or parent.name_column is None or parent.label.replace(" ", "_") in table.columns:
                continue
            p = f"p{index}"
            items.append(f"{p}.{_q(parent.name_column)} AS {_q(parent.label.replace(' ', '_'))}")
            joins += f" LEFT JOIN {_q(parent.name)} {p} ON {p}.{_q(fk.ref_column)} = {alias}.{_q(fk.column)}"
        return ", ".join(items), joins

    def _order(self, table: TableConfig, alias: str) -> str:
        return f" ORDER BY {alias}.{_q(table.primary_key)}" if table.primary_key else ""

    def _rows(self, table: TableConfig, where: str, params: dict[str, Any], *, counting: bool) -> tuple[str, str]:
        if counting and not self._lists_counts:
            return f"SELECT count(*) AS count FROM {_q(table.name)} t{where}", "count"
        items, joins = self._select(table, "t")
        return f"SELECT {items} FROM {_q(table.name)} t{joins}{where}{self._order(table, 't')}", "rows"

    def _filters_sql(self, table: TableConfig, found: _Found, params: dict[str, Any]) -> str:
        parts: list[str] = []
        for index, (owner, column, value) in enumerate(found.filters):
            if owner is table:
                params[f"v{index}"] = value
                parts.append(f"t.{_q(column)} = :v{index}")
        return (" WHERE " + " AND ".join(parts)) if parts else ""

    def _parent_of(self, table: TableConfig, found: _Found) -> tuple[TableConfig, str, str] | None:
        for fk in table.foreign_keys:
            parent = self._by_name.get(fk.references)
            if parent is not None and (parent in found.mentioned or (found.who and parent.name_column)):
                return parent, fk.column, fk.ref_column
        return None

    def _child_of(self, table: TableConfig, found: _Found) -> tuple[TableConfig, str, str] | None:
        for child in found.mentioned:
            for fk in child.foreign_keys:
                if fk.references == table.name and child is not table:
                    return child, fk.column, fk.ref_column
        return None

    def _said_by_row(self, table: TableConfig, parent: TableConfig, found: _Found) -> bool:
        """Whether ``table``'s own row answers a question about its ``parent``: a ``row`` template names the parent
        (``Ticket {id} for {customer} is about …``) and the question asks for none of the parent's other columns."""
        field = "{" + parent.label.replace(" ", "_") + "}"
        asked = [c for c in self._columns_in(parent, found) if c != parent.name_column]
        return not asked and any(field in template for template in table.row)

    def _by_key(self, table: TableConfig, key_sql: str, params: dict[str, Any], found: _Found, what: str) -> Lookup:
        """Rows about one row of ``table`` selected by ``key_sql`` (on alias ``k``): its parent, its children, or
        itself."""
        parent = self._parent_of(table, found)
        if parent is not None and not self._columns_in(table, found) and not self._said_by_row(table, parent[0], found):
            other, column, ref = parent
            items, joins = self._select(other, "t")
            query = (
                f"SELECT {items} FROM {_q(table.name)} k JOIN {_q(other.name)} t ON t.{_q(ref)} = k.{_q(column)}"
                f"{joins} WHERE {key_sql}"
            )
            return Lookup(
                "parent", other.name, query, params, self._columns_in(other, found), f"the {other.label} of {what}"
            )
        child = self._child_of(table, found)
        if child is not None:
            other, column, ref = child
            where = " AND ".join([f"t.{_q(c)} = :v{i}" for i, (o, c, v) in enumerate(found.filters) if o is other])
            params.update({f"v{i}": v for i, (o, c, v) in enumerate(found.filters) if o is other})
            join = f" JOIN {_q(table.name)} k ON k.{_q(ref)} = t.{_q(column)}"
            condition = f" WHERE {key_sql}" + (f" AND {where}" if where else "")
            if found.counting and not self._lists_counts:
                # one row per matching row of the named table (none when nothing matches: the next table is tried),
                # its children counted even when there are none
                on = f"t.{_q(column)} = k.{_q(ref)}" + (f" AND {where}" if where else "")
                query = (
                    f"SELECT count(t.{_q(column)}) AS count FROM {_q(table.name)} k LEFT JOIN {_q(other.name)} t "
                    f"ON {on} WHERE {key_sql} GROUP BY k.{_q(ref)}"
                )
                return Lookup("count", other.name, query, params, (), f"{other.plural} of {what}")
            items, joins = self._select(other, "t")
            left_out = next((key for t, key in found.excluded if t is other and other.primary_key), None)
            looked_for = f"{other.plural} of {what}"
            if left_out is not None:
                condition += f" AND t.{_q(other.primary_key or '')} <> :except_id"
                params["except_id"] = left_out
                looked_for += f" other than {other.label} {left_out}"
            query = f"SELECT {items} FROM {_q(other.name)} t{join}{joins}{condition}{self._order(other, 't')}"
            kind = "count" if found.counting else "children"
            return Lookup(kind, other.name, query, params, self._columns_in(other, found), looked_for)
        items, joins = self._select(table, "k")
        query = f"SELECT {items} FROM {_q(table.name)} k{joins} WHERE {key_sql}"
        kind = "by_name" if "name" in params else "by_id"
        return Lookup(kind, table.name, query, params, self._columns_in(table, found), what)

    def _plan(self, message: str) -> list[Lookup]:
        message = self._corrected(message)
        found = self._find(message)
        if found.ids:
            table, key = found.ids[0]
            assert table.primary_key is not None
            return [self._by_key(table, f"k.{_q(table.primary_key)} = :id", {"id": key}, found, f"{table.label} {key}")]
        if found.names:
            name = found.names[0]
            mentioned = [t for t in found.mentioned if t.name_column]
            others = [t for t in self.tables if t.name_column and t not in found.mentioned]
            out = [self._named_lookup(t, name, found) for t in mentioned]
            out += [v for t in found.mentioned for v in self._by_value(t, name, found)]
            out += [self._named_lookup(t, name, found) for t in others]
            out += [v for t in others for v in self._by_value(t, name, found)]
            if out:
                return out
        if not found.mentioned and not found.filters:
            return []
        table = self._listed(found)
        params: dict[str, Any] = {}
        where = self._filters_sql(table, found, params)
        query, _ = self._rows(table, where, params, counting=found.counting)
        values = [v for o, _, v in found.filters if o is table]
        what = " ".join([*values, table.plural])
        kind = "count" if found.counting else ("filter" if values else "all")
        return [Lookup(kind, table.name, query, params, self._columns_in(table, found), what)]

    def _listed(self, found: _Found) -> TableConfig:
        """The table whose rows answer a question naming no row: the first mentioned that references another
        mentioned one (its rows name their parent: ``which customer has the billing ticket?`` lists tickets), else
        the first mentioned, else the first filtered."""
        if not found.mentioned:
            return found.filters[0][0]
        mentioned = {t.name for t in found.mentioned}
        return next(
            (t for t in found.mentioned if any(fk.references in mentioned - {t.name} for fk in t.foreign_keys)),
            found.mentioned[0],
        )

    def _named_lookup(self, table: TableConfig, name: str, found: _Found) -> Lookup:
        assert table.name_column is not None
        condition = f"k.{_q(table.name_column)} ILIKE :name"
        lookup = self._by_key(table, condition, {"name": f"%{name}%"}, found, f"{table.label} “{name}”")
        return replace(lookup, named=(table.label, name))

    def _by_value(self, table: TableConfig, value: str, found: _Found) -> list[Lookup]:
        """The rows of a mentioned table whose text column holds ``value`` (``customers from Spain``), one lookup per
        text column; a count that finds none returns no row, so the next column is tried."""
        out: list[Lookup] = []
        for column in table.columns:
            if column in (table.primary_key, table.name_column) or table.types.get(column) not in _TEXT:
                continue
            where = f" WHERE t.{_q(column)} ILIKE :value"
            what = f"{table.plural} with {column.replace('_', ' ')} {value}"
            if found.counting and not self._lists_counts:
                query = f"SELECT count(*) AS count FROM {_q(table.name)} t{where} HAVING count(*) > 0"
                out.append(Lookup("count", table.name, query, {"value": value}, (), what))
            else:
                items, joins = self._select(table, "t")
                query = f"SELECT {items} FROM {_q(table.name)} t{joins}{where}{self._order(table, 't')}"
                kind = "count" if found.counting else "filter"
                out.append(Lookup(kind, table.name, query, {"value": value}, (column,), what))
        return out

    def plan(self, message: str, history: Sequence[str] = ()) -> list[Lookup]:
        """The lookups for ``message``, in the order to try them; ``history``: earlier user messages, oldest first.
        Empty when the question names nothing the tables know."""
        lookups = self._plan(message)
        if lookups and (lookups[0].kind not in ("all", "count") or not history or not _refers_back(message)):
            return lookups
        for earlier in reversed(history):
            entity = self._entity(earlier)
            if entity is not None:
                return self._plan(f"{message} {entity}")
        return lookups

    def _entity(self, message: str) -> str | None:
        """The row an earlier message was about, as words a question can carry (``order 1042``, ``Maria Garcia``)."""
        found = self._find(self._corrected(message))
        if found.ids:
            table, key = found.ids[0]
            return f"{table.label} {key}"
        if found.names:
            name = found.names[0]
            return name if name[:1].isupper() else name.title()
        return None


_REFERS_BACK: Final = re.compile(r"\b(?:he|she|they|him|her|his|hers|their|them|it|its|that one|this one)\b")


def _refers_back(message: str) -> bool:
    return bool(_REFERS_BACK.search(message.lower()))


def _correct_word(word: str, vocabulary: tuple[str, ...]) -> str:
    """``word`` with its misspelling of a ``vocabulary`` word corrected, else as written (a name keeps its capital)."""
    corrected = correct_typos(word, vocabulary)
    return corrected if corrected != word.lower() else word
