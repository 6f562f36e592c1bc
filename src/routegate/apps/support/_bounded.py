"""A checked query wrapped so that PostgreSQL itself bounds what it sends back, in rows and in bytes.

Applying a row cap after the fact is not enough: a client-side cursor receives the whole result before the first
row is looked at, so one allowed query (a recursive CTE that doubles a string, cross-joined) can pull hundreds of
megabytes into the desk within its statement timeout. Here the bounds are part of the statement:

1. ``LIMIT rows + 1`` on the checked query (the extra row tells that the row cap cut the result);
2. each value longer than ``field_chars`` characters is cut to that length (``left``) before anything else is done
   with it, and each row becomes a JSON array of its values (``to_json``: a value that was not cut keeps its JSON
   type) — a single huge value never leaves the server;
3. rows are kept only while the running total of their JSON text stays within ``bytes``.

The columns are addressed by position (``AS rg_q(c0, c1, ...)``); their names come from describing the query
first (``LIMIT 0``: planned, not run). PostgreSQL sends at most ``bytes`` of row data plus a few numbers per row;
the rows' count before the byte cut comes with them, so a cut result is always reported as cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql

_DESCRIBE: Final = "SELECT * FROM ({query}) AS rg_q LIMIT 0"
_WRAPPER: Final = """
WITH "rg_rows" AS MATERIALIZED (
    SELECT row_number() OVER () AS "n", "rg_l"."j", "rg_l"."cut"
    FROM (
        SELECT array_to_json(ARRAY[{values}]::json[])::text AS "j", {cuts} AS "cut"
        FROM ({query}) AS "rg_q"{columns} LIMIT {rows_plus_one}
    ) AS "rg_l"
), "rg_sized" AS (
    SELECT "n", "j", "cut", sum(octet_length("j")) OVER (ORDER BY "n") AS "total" FROM "rg_rows"
)
SELECT "s"."n", "s"."j", "s"."cut", "k"."seen"
FROM (SELECT count(*) AS "seen" FROM "rg_rows") AS "k"
LEFT JOIN "rg_sized" AS "s" ON "s"."total" <= {bytes}
ORDER BY "s"."n"
"""
# whether a value is longer than field_chars characters, without counting the characters of a huge one (a
# character is 1-4 bytes in UTF-8, so the byte length, which PostgreSQL knows without a scan, mostly decides)
_LONG: Final = (
    "CASE WHEN octet_length({c}::text) <= {chars} THEN false WHEN octet_length({c}::text) > 4 * {chars} THEN true "
    "ELSE length({c}::text) > {chars} END"
)
# one value, cut to field_chars characters before it is turned into JSON (a short value keeps its JSON type)
_VALUE: Final = "CASE WHEN {long} THEN to_json(left({c}::text, {chars})) ELSE to_json({c}) END"
_CUT: Final = "coalesce({long}, false)"


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one result may hold: ``rows`` rows, ``bytes`` bytes of row data (JSON text), ``field_chars``
    characters per value."""

    rows: int
    bytes: int
    field_chars: int


@dataclass(frozen=True, slots=True)
class BoundedRows:
    """The rows as JSON array texts (values in column order), in the query's order, and why the result was cut
    (``None``: it was not)."""

    rows: tuple[str, ...]
    truncation: str | None


def describe_query(query: str) -> sql.Composed:
    """``query`` with no rows: its cursor's description gives the result's column names (nothing is executed
    beyond planning)."""
    return sql.SQL(_DESCRIBE).format(query=sql.SQL(query))


def bounded_query(query: str, width: int, bounds: Bounds) -> sql.Composed:
    """``query`` (a checked, rendered SELECT of ``width`` columns; its ``%(name)s`` placeholders stay as they are)
    inside the bounds. Each row comes back as a JSON array of its values, in column order."""
    names = [sql.Identifier(f"c{i}") for i in range(width)]
    chars = sql.Literal(bounds.field_chars)
    refs = [sql.SQL('"rg_q".{}').format(name) for name in names]
    longs = [sql.SQL(_LONG).format(c=ref, chars=chars) for ref in refs]
    cuts = [sql.SQL(_CUT).format(long=long) for long in longs]
    return sql.SQL(_WRAPPER).format(
        values=sql.SQL(", ").join(
            sql.SQL(_VALUE).format(long=long, c=ref, chars=chars) for long, ref in zip(longs, refs, strict=True)
        ),
        cuts=sql.SQL("({})").format(sql.SQL(" OR ").join(cuts)) if cuts else sql.SQL("false"),
        query=sql.SQL(query),  # the guard's rendering of the checked tree
        columns=sql.SQL("({})").format(sql.SQL(", ").join(names)) if names else sql.SQL(""),
        rows_plus_one=sql.Literal(bounds.rows + 1),
        bytes=sql.Literal(bounds.bytes),
    )


async def read_bounded(cursor: psycopg.AsyncCursor[dict[str, Any]], bounds: Bounds) -> BoundedRows:
    """Read the rows of :func:`bounded_query` and say which bound cut them."""
    kept: list[str] = []
    seen = 0
    fields_cut = False
    for row in await cursor.fetchall():
        seen = int(row["seen"])
        if row["n"] is None or int(row["n"]) > bounds.rows:
            continue
        kept.append(str(row["j"]))
        fields_cut = fields_cut or bool(row["cut"])
    reasons: list[str] = []
    if seen > bounds.rows and len(kept) == bounds.rows:
        reasons.append(f"only the first {bounds.rows} rows (row cap)")
    elif len(kept) < seen:
        reasons.append(f"only the first {len(kept)} rows: the rest is over the {bounds.bytes}-byte cap")
    if fields_cut:
        reasons.append(f"values longer than {bounds.field_chars} characters were cut to that length")
    return BoundedRows(tuple(kept), "; ".join(reasons) or None)
