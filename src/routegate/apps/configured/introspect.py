"""What a database holds, read from PostgreSQL's own catalog: tables, columns and their types, primary keys,
foreign keys, and the few values of low-cardinality text columns (the filters a question may name).

``desk init --from-sql`` loads the SQL file into a scratch schema of the embedded PostgreSQL
(:func:`~.loader.scratch_load`) and reads it back from there; ``--database-url`` reads an existing database the
same way. PostgreSQL runs the file (split into statements and moved into the scratch schema by :mod:`.script`),
and its catalog says what the file made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql


MAX_FILTER_VALUES: Final = 12
"""A text column with at most this many distinct values (some of them repeated) is a filter: its values are
listed in the configuration, so that "how many orders are open?" finds ``status = 'open'``."""
_TEXT_TYPES: Final = frozenset({"text", "character varying", "character", "citext"})

_TABLES_SQL: Final = (
    "SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY c.relname"
)
_COLUMNS_SQL: Final = (
    "SELECT c.relname AS table, a.attname AS column, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type "
    "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum"
)
_KEYS_SQL: Final = (
    "SELECT c.relname AS table, k.contype AS kind, "
    "(SELECT array_agg(a.attname ORDER BY x.n) FROM unnest(k.conkey) WITH ORDINALITY x(attnum, n) "
    " JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = x.attnum) AS columns, "
    "f.relname AS references, "
    "(SELECT array_agg(a.attname ORDER BY x.n) FROM unnest(k.confkey) WITH ORDINALITY x(attnum, n) "
    " JOIN pg_catalog.pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = x.attnum) AS ref_columns "
    "FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_catalog.pg_class f ON f.oid = k.confrelid "
    "WHERE n.nspname = %s AND k.contype IN ('p', 'f') AND c.relname = ANY(%s) ORDER BY c.relname, k.conname"
)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True, slots=True)
class Reference:
    """A single-column foreign key: ``column`` → ``references.ref_column``."""

    column: str
    references: str
    ref_column: str


@dataclass(slots=True)
class Table:
    name: str
    columns: list[Column]
    primary_key: str | None = None
    foreign_keys: list[Reference] = field(default_factory=list)
    filters: dict[str, list[str]] = field(default_factory=dict)
    rows: int = 0
    sample: list[dict[str, Any]] = field(default_factory=list)  # a few rows, for the example questions

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


def table_names(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    return [str(row[0]) for row in conn.execute(_TABLES_SQL, (schema,)).fetchall()]


def introspect(conn: psycopg.Connection[Any], schema: str, tables: list[str], *, sample_rows: int = 5) -> list[Table]:
    """The named tables of ``schema``, in the given order, as the catalog describes them."""
    found: dict[str, Table] = {name: Table(name, []) for name in tables}
    for table, column, kind in conn.execute(_COLUMNS_SQL, (schema, tables)).fetchall():
        found[str(table)].columns.append(Column(str(column), str(kind)))
    for table, kind, columns, references, ref_columns in conn.execute(_KEYS_SQL, (schema, tables)).fetchall():
        entry = found[str(table)]
        if kind == "p" and columns and len(columns) == 1:
            entry.primary_key = str(columns[0])
        elif kind == "f" and columns and len(columns) == 1 and references in found and ref_columns:
            entry.foreign_keys.append(Reference(str(columns[0]), str(references), str(ref_columns[0])))
    for entry in found.values():
        name = sql.Identifier(schema, entry.name)
        counted = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()
        entry.rows = int(counted[0]) if counted else 0
        order = sql.SQL(" ORDER BY {}").format(sql.Identifier(entry.primary_key)) if entry.primary_key else sql.SQL("")
        cur = conn.execute(sql.SQL("SELECT * FROM {}{} LIMIT %s").format(name, order), (sample_rows,))
        names = [d.name for d in cur.description or ()]
        entry.sample = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        for column in entry.columns:
            if column.type not in _TEXT_TYPES or column.name == entry.primary_key:
                continue
            values = conn.execute(
                sql.SQL("SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY 1 LIMIT %s").format(
                    c=sql.Identifier(column.name), t=name
                ),
                (MAX_FILTER_VALUES + 1,),
            ).fetchall()
            present = conn.execute(
                sql.SQL("SELECT count({c}) FROM {t}").format(c=sql.Identifier(column.name), t=name)
            ).fetchone()
            filled = int(present[0]) if present else 0
            if 1 <= len(values) <= MAX_FILTER_VALUES and filled > len(values):  # some value repeats: a category
                texts = [str(v[0]) for v in values]
                if all(len(t) <= 40 for t in texts):
                    entry.filters[column.name] = texts
    return list(found.values())
