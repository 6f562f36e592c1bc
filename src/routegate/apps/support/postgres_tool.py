"""The Postgres tool: ``query`` (read-only SQL) + optional ``params`` → ``rows``, ``row_count``.

Layers, outermost first: the SQL guard (:mod:`.sqlguard`) parses the query, resolves every table and column
reference by scope against the readable tables' real columns (read from the catalog once), checks it against its
allowlists and renders what runs; the statement then runs in a transaction that is ``READ ONLY`` and always rolled
back, with a ``statement_timeout``, with ``search_path`` pinned to ``pg_catalog, <desk schema>, pg_temp`` (an
unqualified name means a built-in or a desk table, never one in ``public``, and a temporary table cannot shadow a
desk table), as the restricted reader role when the database has one. An empty result is a normal result
(``row_count == 0``), not an error.

The result is bounded at the server, before it leaves PostgreSQL (:mod:`._bounded`): at most ``row_cap`` rows,
every value longer than ``max_field_chars`` characters cut to that length, and rows only while their running total
stays within ``max_bytes``. A cut result says so (``truncated`` and a ``truncation`` sentence).

**The statement timeout is a deadline for the call.** PostgreSQL's ``statement_timeout`` ends most statements on
time, but it acts only where the server checks for interrupts: one step of work (a function applied to a value of
hundreds of megabytes, a chain of them in one expression) runs to its end first, seconds past the timeout. So the
call does not wait for the server: :data:`DEADLINE_GRACE_SECONDS` after the timeout it sends PostgreSQL a cancel
request for the statement (:meth:`psycopg.AsyncConnection.cancel_safe`) and gives the server
:data:`CANCEL_GRACE_SECONDS` to end it; then it ends with ``statement_timeout`` whatever the server does. A
statement still running then keeps its connection, out of the pool, until the server has ended it (the cancel is
pending there: it ends at the server's next interrupt check) and the transaction is rolled back; only then does the
connection go back to the pool (:meth:`PostgresTool.drained` waits for that). A call therefore ends at most
``statement_timeout`` + :data:`CALL_MARGIN_SECONDS` after it has its pooled connection.

One call is four statements in one round trip, sent as one psycopg pipeline with one ``Sync``: ``BEGIN READ ONLY``,
one settings statement (``SELECT set_config(..., true)`` for the timeout, the search path and the role, local to
the transaction), the bounded query and ``ROLLBACK``. The settings cannot share the query's own statement
(PostgreSQL applies a role and a timeout from the next statement on), and the rollback is what undoes a
session-level change a query could make (``set_config(..., false)``, refused by the guard): without it such a
change would outlive the call on the pooled connection. The bounded query needs the checked query's column names;
they are read once per checked query (a ``LIMIT 0`` describe, in the same transaction, one more round trip) and
kept, with the rendered statement, for the next call of the same query (at most
:data:`PLAN_CACHE_SIZE` of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql
    from psycopg.pq import TransactionStatus

from routegate.apps.support._bounded import BoundedRows, Bounds, bounded_query, describe_query, read_bounded
from routegate.apps.support._stars import expand_stars
from routegate.apps.support.db import AsyncConn, SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.sqlguard import check_sql
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.errors import ConfigurationError

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)

DEFAULT_ROW_CAP: Final = 100
DEFAULT_MAX_BYTES: Final = 64 * 1024
DEFAULT_MAX_FIELD_CHARS: Final = 2000
DEFAULT_STATEMENT_TIMEOUT_MS: Final = 2000
DEADLINE_GRACE_SECONDS: Final = 0.25
"""How long after ``statement_timeout`` the client stops waiting and cancels the statement itself (PostgreSQL's own
timeout usually ends the statement first: this is the time for its error to arrive)."""
CANCEL_GRACE_SECONDS: Final = 0.25
"""How long the client then gives the cancel request (a new connection to the server's port) and the server to end
the statement before the call ends anyway."""
CALL_MARGIN_SECONDS: Final = DEADLINE_GRACE_SECONDS + CANCEL_GRACE_SECONDS
"""A call ends at most this long after ``statement_timeout`` (counted from when it has its connection)."""
PLAN_CACHE_SIZE: Final = 256
"""How many checked queries keep their column names and rendered bounded statement (the oldest goes first)."""
_BEGIN: Final = b"BEGIN READ ONLY"
_ROLLBACK: Final = b"ROLLBACK"

_COLUMNS_SQL: Final = (
    "SELECT c.relname AS table, a.attname AS column FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY c.relname, a.attnum"
)


@dataclass(frozen=True, slots=True)
class SqlResult:
    """The tool's output: ``rows`` (objects), ``row_count``, and whether a bound cut the result (``truncated``,
    with ``truncation`` saying which bound, for the answer and the trace)."""

    rows: tuple[Mapping[str, Any], ...]
    row_count: int
    truncated: bool = False
    truncation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rows": [dict(r) for r in self.rows],
            "row_count": self.row_count,
            "truncated": self.truncated,
        }
        if self.truncation:
            out["truncation"] = self.truncation
        return out


def _plain(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return value


class PostgresTool:
    """Runs guarded read-only SELECTs on the database's readable tables (``customers`` and ``tickets`` by default).

    ``columns``: the only tables and columns a query may name (a desk's configured ones, ``{"customers": ("id",
    "name"), ...}``); a ``*`` is expanded to them before the guard sees the query (:mod:`._stars`), so it never
    reaches a column left out. Without it, the database's readable tables with all their columns, read from the
    catalog once."""

    name = "postgres"

    def __init__(
        self,
        db: SupportDatabase,
        *,
        columns: Mapping[str, Sequence[str]] | None = None,
        row_cap: int = DEFAULT_ROW_CAP,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    ) -> None:
        for label, value, least in (
            ("row_cap", row_cap, 1),
            ("statement_timeout_ms", statement_timeout_ms, 1),
            ("max_bytes", max_bytes, 256),
            ("max_field_chars", max_field_chars, 16),
        ):
            if value < least:
                raise ConfigurationError(f"{label} must be >= {least}, got {value}")
        self._db = db
        self.row_cap = row_cap
        self.statement_timeout_ms = statement_timeout_ms
        self.bounds = Bounds(rows=row_cap, bytes=max_bytes, field_chars=max_field_chars)
        self._configured = None if columns is None else {table: tuple(names) for table, names in columns.items()}
        self._columns: dict[str, tuple[str, ...]] | None = self._configured
        self._setup: tuple[str | None, bytes] | None = None  # (reader role, the settings statement)
        self._plans: dict[str, _Plan] = {}  # checked SQL -> its column names and bounded statement
        self._draining: set[asyncio.Task[tuple[_Plan, BoundedRows]]] = set()  # statements past their call's end

    @property
    def deadline_seconds(self) -> float:
        """The client-side bound on one statement: ``statement_timeout`` plus :data:`DEADLINE_GRACE_SECONDS`."""
        return self.statement_timeout_ms / 1000 + DEADLINE_GRACE_SECONDS

    def _settings(self) -> sql.Composed:
        """The one statement that sets the read-only transaction up: the statement timeout, the pinned search path
        and the reader role (last), each local to the transaction (``set_config(..., true)``)."""
        settings = [
            ("statement_timeout", sql.Literal(str(self.statement_timeout_ms))),
            ("search_path", sql.Literal(f"pg_catalog, {sql.Identifier(self._db.schema).as_string(None)}, pg_temp")),
        ]
        if self._db.reader_role is not None:
            settings.append(("role", sql.Literal(self._db.reader_role)))
        return sql.SQL("SELECT {}").format(
            sql.SQL(", ").join(
                sql.SQL("set_config({}, {}, true)").format(sql.Literal(name), value) for name, value in settings
            )
        )

    async def _readable_columns(self) -> dict[str, tuple[str, ...]]:
        """The readable tables' real columns, in table order, from the catalog (read once all of them exist)."""
        if self._columns is None:
            tables = sorted(self._db.readable_tables)
            try:
                async with self._db.connection() as conn:
                    cursor = await conn.execute(_COLUMNS_SQL, (self._db.schema, tables))
                    found = await cursor.fetchall()
            except psycopg.Error as exc:
                detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ToolError("database_error", f"could not read the readable tables' columns: {detail}") from exc
            columns: dict[str, list[str]] = {}
            for row in found:
                columns.setdefault(str(row["table"]), []).append(str(row["column"]))
            found_columns = {table: tuple(names) for table, names in columns.items()}
            missing = sorted(set(tables) - set(found_columns))
            if missing:  # a readable table is gone (or not created yet): the database is broken; look again next time
                raise ToolError(
                    "database_error", f"the readable table(s) {', '.join(missing)} are missing from the desk's schema"
                )
            self._columns = found_columns
        return self._columns

    async def prime(self) -> None:
        """Read the readable tables' columns now (once), so the first turns do not each look them up."""
        await self._readable_columns()

    async def run(self, query: str, params: Mapping[str, Any] | None = None, *, tenant: str = ANONYMOUS) -> SqlResult:
        """Check and run one query, on a pooled connection taken in ``tenant``'s turn. Raises ``SqlRefusedError``
        (refused) or :class:`ToolError` (failed)."""
        columns = await self._readable_columns()
        tables = self._db.readable_tables
        if self._configured is not None:
            tables = frozenset(self._configured)
            expanded = expand_stars(query, self._configured)
            query = expanded if isinstance(expanded, str) else query
        checked = check_sql(query, params, tables=tables, schema=self._db.schema, columns=columns)
        try:
            async with contextlib.AsyncExitStack() as stack:
                conn = await stack.enter_async_context(self._db.connection(tenant))
                # the statement's task gives the connection back, when the server has ended the statement
                statement = asyncio.ensure_future(self._statement(conn, stack.pop_all(), checked.sql, checked.params))
            plan, fetched = await self._within_deadline(conn, statement)
        except (psycopg.errors.QueryCanceled, TimeoutError) as exc:
            raise ToolError(
                "statement_timeout", f"the query ran longer than statement_timeout={self.statement_timeout_ms} ms"
            ) from exc
        except psycopg.Error as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolError("database_error", f"the database refused the query: {detail}") from exc
        rows = tuple(
            {
                name: _plain(value)
                for name, value in zip(plan.names, json.loads(text, parse_float=decimal.Decimal), strict=True)
            }
            for text in fetched.rows
        )
        return SqlResult(
            rows=rows, row_count=len(rows), truncated=fetched.truncation is not None, truncation=fetched.truncation
        )

    async def _statement(
        self, conn: AsyncConn, held: contextlib.AsyncExitStack, checked: str, params: Mapping[str, Any] | None
    ) -> tuple[_Plan, BoundedRows]:
        """The exchange on ``conn``, then the connection given back (``held``) once nothing runs on it."""
        async with held:
            try:
                return await self._exchange(conn, checked, params)
            finally:
                # a failed or cancelled statement leaves the transaction open (the server skips the pipeline's
                # ROLLBACK after an error); nothing to do if the connection is gone: the pool discards it
                if conn.info.transaction_status in _OPEN and not conn.closed:
                    await conn.execute(_ROLLBACK)

    async def _within_deadline(
        self, conn: AsyncConn, statement: asyncio.Task[tuple[_Plan, BoundedRows]]
    ) -> tuple[_Plan, BoundedRows]:
        """``statement``'s result, or :class:`TimeoutError` at its deadline. The statement's own task is never
        cancelled mid-statement (psycopg would then wait, unbounded by this call, for the server to end it): at the
        deadline, or when this call is cancelled, the server is asked to cancel the statement, given
        :data:`CANCEL_GRACE_SECONDS`, and a statement still running is left to end there (:attr:`_draining`)."""
        asked = False
        try:
            done, _ = await asyncio.wait((statement,), timeout=self.deadline_seconds)
            if not done:
                asked = True
                await self._cancel(conn, statement)
                if not statement.done():
                    raise TimeoutError
            return statement.result()
        finally:
            if not statement.done():  # past the deadline, or this call was cancelled
                if not asked:
                    await self._cancel(conn, statement)
                if not statement.done():
                    self._draining.add(statement)
                    statement.add_done_callback(self._drained_one)

    async def _cancel(self, conn: AsyncConn, statement: asyncio.Task[tuple[_Plan, BoundedRows]]) -> None:
        """Ask the server to cancel ``conn``'s statement and wait for it to end, :data:`CANCEL_GRACE_SECONDS` at
        most in all."""
        with contextlib.suppress(TimeoutError, psycopg.Error):
            async with asyncio.timeout(CANCEL_GRACE_SECONDS):
                await conn.cancel_safe(timeout=CANCEL_GRACE_SECONDS)
                await asyncio.wait((statement,))

    def _drained_one(self, statement: asyncio.Task[tuple[_Plan, BoundedRows]]) -> None:
        self._draining.discard(statement)
        if not statement.cancelled():
            statement.exception()  # retrieved: the call that ran it has ended with statement_timeout already

    async def drained(self) -> None:
        """Wait until every statement that outlived its call has ended on the server and its connection is back
        in the pool (see the module's description)."""
        while self._draining:
            await asyncio.wait(tuple(self._draining))

    async def _exchange(
        self, conn: AsyncConn, checked: str, params: Mapping[str, Any] | None
    ) -> tuple[_Plan, BoundedRows]:
        """One pipeline, one ``Sync``: ``BEGIN READ ONLY``, the settings statement, the bounded query,
        ``ROLLBACK``. A query seen for the first time is described first, in the same transaction (its columns are
        read back before the query is sent: one more round trip)."""
        async with conn.pipeline():
            await conn.execute(_BEGIN)
            await conn.execute(self._settings_statement())
            plan = self._plans.get(checked)
            if plan is None:
                described = await conn.execute(describe_query(checked), params)
                await described.fetchall()  # flushes the pipeline so far: the transaction stays open
                names = tuple(column.name for column in described.description or ())
                plan = self._remember(
                    checked, _Plan(names, bounded_query(checked, len(names), self.bounds).as_bytes(conn))
                )
            cursor = await conn.execute(plan.statement, params)
            await conn.execute(_ROLLBACK)
        return plan, await read_bounded(cursor, self.bounds)

    def _settings_statement(self) -> bytes:
        """:meth:`_settings`, rendered once per reader role."""
        role = self._db.reader_role
        if self._setup is None or self._setup[0] != role:
            self._setup = (role, self._settings().as_bytes(None))
        return self._setup[1]

    def _remember(self, checked: str, plan: _Plan) -> _Plan:
        if len(self._plans) >= PLAN_CACHE_SIZE:
            del self._plans[next(iter(self._plans))]
        self._plans[checked] = plan
        return plan


@dataclass(frozen=True, slots=True)
class _Plan:
    """A checked query's result column names and its bounded statement, rendered (``%(name)s`` placeholders kept)."""

    names: tuple[str, ...]
    statement: bytes
