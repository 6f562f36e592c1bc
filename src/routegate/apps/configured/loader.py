"""Running a desk's SQL file (:mod:`.script`) on a connection inside the caller's transaction: plain statements in
batches (one round trip each), ``COPY ... FROM stdin`` rows through the copy protocol. A statement PostgreSQL
refuses is reported with the file, its line and PostgreSQL's message; the caller's transaction is then rolled back
by the caller. The synchronous pair serves ``desk init`` (:mod:`.introspect`), the asynchronous one the desk's
start (:mod:`.database`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg

from routegate.apps.configured.config import DeskConfigError
from routegate.apps.configured.script import SqlScript, Statement, batch_sql, batches, parse_script

_SETTINGS_SQL: Final = "SELECT name FROM pg_catalog.pg_settings"
_UNCHECKED_BODIES: Final = "SET LOCAL check_function_bodies = off"
"""A function body runs as written when it is called (never by the desk), so the load does not check it, as
``pg_dump``'s files ask themselves: a body naming ``public.orders`` (a table the load moves to the desk's schema) is
text, not a failure."""


def _refused(source: str, statement: Statement, exc: psycopg.Error) -> DeskConfigError:
    lines = [line.strip() for line in str(exc).strip().splitlines()[:3]]
    detail = "; ".join(line for line in lines if line) or type(exc).__name__
    return DeskConfigError(
        f"{source}: PostgreSQL refused the SQL file at line {statement.line} ({detail}); fix the statement there"
    )


def run_script(conn: psycopg.Connection[Any], text: str, *, source: str) -> SqlScript:
    """Run ``text`` on ``conn`` (in a transaction the caller holds, ``search_path`` set to the desk's schema)."""
    known = [str(row[0]) for row in conn.execute(_SETTINGS_SQL).fetchall()]
    script = parse_script(text, source=source, known_settings=known)
    conn.execute(_UNCHECKED_BODIES)
    for batch in batches(script):
        try:
            with conn.transaction():  # a savepoint: a refused batch is run again statement by statement
                _run(conn, batch)
        except psycopg.Error as exc:
            raise _locate(conn, batch, source, exc) from None
    return script


def _run(conn: psycopg.Connection[Any], batch: Sequence[Statement]) -> None:
    first = batch[0]
    if first.copy_rows is None:
        conn.execute(batch_sql(batch))
        return
    with conn.cursor().copy(first.sql) as copy:
        copy.write(first.copy_rows)


def _locate(conn: psycopg.Connection[Any], batch: Sequence[Statement], source: str, exc: psycopg.Error) -> Exception:
    for statement in batch if len(batch) > 1 else ():
        try:
            with conn.transaction():
                _run(conn, [statement])
        except psycopg.Error as found:
            return _refused(source, statement, found)
    return _refused(source, batch[0], exc)


async def arun_script(conn: psycopg.AsyncConnection[Any], text: str, *, source: str) -> SqlScript:
    """:func:`run_script` on an asynchronous connection."""
    cur = await conn.execute(_SETTINGS_SQL)
    known = [str(_first(row)) for row in await cur.fetchall()]
    script = parse_script(text, source=source, known_settings=known)
    await conn.execute(_UNCHECKED_BODIES)
    for batch in batches(script):
        try:
            async with conn.transaction():
                await _arun(conn, batch)
        except psycopg.Error as exc:
            raise await _alocate(conn, batch, source, exc) from None
    return script


async def _arun(conn: psycopg.AsyncConnection[Any], batch: Sequence[Statement]) -> None:
    first = batch[0]
    if first.copy_rows is None:
        await conn.execute(batch_sql(batch))
        return
    async with conn.cursor().copy(first.sql) as copy:
        await copy.write(first.copy_rows)


async def _alocate(
    conn: psycopg.AsyncConnection[Any], batch: Sequence[Statement], source: str, exc: psycopg.Error
) -> Exception:
    for statement in batch if len(batch) > 1 else ():
        try:
            async with conn.transaction():
                await _arun(conn, [statement])
        except psycopg.Error as found:
            return _refused(source, statement, found)
    return _refused(source, batch[0], exc)


def _first(row: Any) -> Any:
    """A row's first value, whatever the connection's row factory (tuples, or dicts as the desk's pools make)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
