"""Running a desk's SQL file (:mod:`.script`) in the desk's schema, as the desk's owner role (:mod:`._owner`), inside
the caller's transaction, within a time budget.

Plain statements go in batches (one round trip each), ``COPY ... FROM stdin`` rows through the copy protocol into a
staging table. Each round trip has a ``statement_timeout`` of :attr:`LoadLimits.statement_seconds` (or what is left
of :attr:`LoadLimits.total_seconds`, the whole load's budget, when that is less): a file that sleeps or loops ends
with an error naming the lines and the limit. A statement PostgreSQL refuses is reported with the file, its line
and PostgreSQL's message (never the lines of the file PostgreSQL quotes: the error may be read where the file may
not); the caller's transaction is then rolled back by the caller.

The connection is the load's own (:mod:`.database` opens one and closes it; ``desk init`` its own), never a pool's:
what the file sets for its session goes with it. Automatic prepared statements are off on it, so that no statement
of the file's can stand in for one of the loader's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg

from routegate.apps.configured._owner import DeskSchema, Runner, create_owner, create_schema, scratch_schema
from routegate.apps.configured.config import DeskConfigError
from routegate.apps.configured.script import SqlScript, Statement, batch_sql, batches, parse_script

_SETTINGS_SQL: Final = "SELECT name FROM pg_catalog.pg_settings"
_UNCHECKED_BODIES: Final = "SET LOCAL check_function_bodies = off"
"""A function body runs as written when it is called (never by the desk), so the load does not check it, as
``pg_dump``'s files ask themselves: a body naming ``public.orders`` (a table the load moves to the desk's schema) is
text, not a failure."""
_NO_RIGHTS: Final = (
    "; the SQL file runs as the desk's owner role, which may create only in the desk's schema and reach nothing "
    "outside it"
)


@dataclass(frozen=True, slots=True)
class LoadLimits:
    """How long a load may take: ``statement_seconds`` for one round trip (a batch of statements, or one ``COPY``),
    ``total_seconds`` for the whole file (``[database] load_statement_seconds`` / ``load_seconds``)."""

    statement_seconds: float = 10.0
    total_seconds: float = 120.0


DEFAULT_LIMITS: Final = LoadLimits()


class _Clock:
    """The ``statement_timeout`` of each round trip: the statement limit, or what is left of the budget."""

    def __init__(self, conn: psycopg.Connection[Any], limits: LoadLimits, source: str) -> None:
        self.conn = conn
        self.limits = limits
        self.source = source
        self.deadline = time.monotonic() + limits.total_seconds
        self.budget_bound = False

    def arm(self, *, whole: bool = False) -> None:
        """Set the next round trip's ``statement_timeout`` (``whole``: the statement limit, whatever the budget)."""
        left = self.deadline - time.monotonic()
        if left <= 0 and not whole:
            raise self.over(None)
        seconds = self.limits.statement_seconds if whole else min(self.limits.statement_seconds, left)
        self.budget_bound = seconds < self.limits.statement_seconds
        milliseconds = max(1, int(seconds * 1000))
        self.conn.execute("SELECT pg_catalog.set_config('statement_timeout', %s, true)", (str(milliseconds),))

    def over(self, batch: Sequence[Statement] | None) -> DeskConfigError:
        where = ""
        if batch:
            first, last = batch[0].line, batch[-1].line
            where = f" at line {first}" if first == last else f" between lines {first} and {last}"
        if batch is None or self.budget_bound:
            limit = f"its time budget of {self.limits.total_seconds:g} s (load_seconds)"
        else:
            limit = f"the limit of {self.limits.statement_seconds:g} s per statement (load_statement_seconds)"
        return DeskConfigError(
            f"{self.source}: the SQL file ran past {limit}{where}; look for a statement that waits or loops there, or "
            "raise the limit in desk.toml's [database] (desk init: --load-statement-seconds / --load-seconds)"
        )


def _refused(source: str, statement: Statement, exc: psycopg.Error) -> DeskConfigError:
    primary = exc.diag.message_primary or type(exc).__name__
    detail = exc.diag.message_detail
    text = " ".join(f"{primary} ({detail})".split()) if detail else " ".join(primary.split())
    hint = _NO_RIGHTS if isinstance(exc, psycopg.errors.InsufficientPrivilege) else ""
    return DeskConfigError(
        f"{source}: PostgreSQL refused the SQL file at line {statement.line} ({text}){hint}; fix the statement there"
    )


def load_script(
    conn: psycopg.Connection[Any], text: str, target: DeskSchema, *, source: str, limits: LoadLimits
) -> SqlScript:
    """Run ``text`` in ``target``'s schema (made empty by the caller, owned by its role) as that role, on ``conn``
    inside a transaction the caller holds; then seal the schema (:meth:`~._owner.Runner.seal`)."""
    clock = _Clock(conn, limits, source)
    known = [str(row[0]) for row in conn.execute(_SETTINGS_SQL).fetchall()]
    script = parse_script(text, source=source, known_settings=known)
    conn.execute(_UNCHECKED_BODIES)
    runner = Runner(conn, target)
    for batch in batches(script):
        clock.arm()
        try:
            with conn.transaction():  # a savepoint: a refused batch is run again statement by statement
                _run(runner, batch)
        except psycopg.errors.QueryCanceled:
            raise clock.over(batch) from None
        except psycopg.Error as exc:
            raise _locate(runner, clock, batch, source, exc) from None
    clock.arm()
    runner.seal()
    clock.arm(whole=True)  # what reads the tables next (``desk init``: views of the file's) has the same limit
    return script


def _run(runner: Runner, batch: Sequence[Statement]) -> None:
    first = batch[0]
    if first.copy_rows is None or first.copy_into is None:
        runner.run(batch_sql(batch))
    else:
        runner.copy(first.copy_into, first.copy_rows)


def _locate(
    runner: Runner, clock: _Clock, batch: Sequence[Statement], source: str, exc: psycopg.Error
) -> DeskConfigError:
    for statement in batch if len(batch) > 1 else ():
        clock.arm()
        try:
            with runner.conn.transaction():
                _run(runner, [statement])
        except psycopg.errors.QueryCanceled:
            return clock.over([statement])
        except psycopg.Error as found:
            return _refused(source, statement, found)
    return _refused(source, batch[0], exc)


CONNECT_TIMEOUT_SECONDS: Final = 10


def load_connection(url: str) -> psycopg.Connection[Any]:
    """A connection of the load's own (autocommit; no automatic prepared statements)."""
    conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    conn.prepare_threshold = None
    return conn


@contextmanager
def scratch_load(
    conn: psycopg.Connection[Any], text: str, *, source: str, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[tuple[str, SqlScript]]:
    """``desk init``'s load: ``text`` in a scratch schema owned by a scratch role, in a transaction that is rolled
    back when the block ends, whatever happens (nothing of the file, its schema or its role stays). Yields the
    schema's name and the script; read the tables inside the block."""
    target = scratch_schema()
    with conn.transaction(force_rollback=True):
        create_owner(conn, target)
        create_schema(conn, target)
        yield target.name, load_script(conn, text, target, source=source, limits=limits)
