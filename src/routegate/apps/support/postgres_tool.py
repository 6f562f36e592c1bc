"""The Postgres tool: ``query`` (read-only SQL) + optional ``params`` → ``rows``, ``row_count``.

Layers, outermost first: the SQL guard (:mod:`.sqlguard`) parses the query, resolves every table reference by
scope, checks it against its allowlists and renders what runs; the statement then runs in a transaction that is
``READ ONLY`` and always rolled back, with a ``statement_timeout``, with ``search_path`` pinned to
``pg_catalog, <desk schema>, pg_temp`` (an unqualified name means a built-in or a desk table, never one in
``public``, and a temporary table cannot shadow a desk table), as the restricted reader role when the database
has one, and at most ``row_cap`` rows are fetched. An empty result is a normal result (``row_count == 0``), not
an error.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql
    from psycopg.pq import TransactionStatus

from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.sqlguard import check_sql
from routegate.errors import ConfigurationError

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)


@dataclass(frozen=True, slots=True)
class SqlResult:
    """The tool's output: ``rows`` (objects), ``row_count``, and whether the row cap cut the result."""

    rows: tuple[Mapping[str, Any], ...]
    row_count: int
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [dict(r) for r in self.rows], "row_count": self.row_count, "truncated": self.truncated}


def _plain(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return value


class PostgresTool:
    """Runs guarded read-only SELECTs on the database's readable tables (``customers`` and ``tickets``)."""

    name = "postgres"

    def __init__(self, db: SupportDatabase, *, row_cap: int = 100, statement_timeout_ms: int = 2000) -> None:
        if row_cap < 1:
            raise ConfigurationError(f"row_cap must be >= 1, got {row_cap}")
        if statement_timeout_ms < 1:
            raise ConfigurationError(f"statement_timeout_ms must be >= 1, got {statement_timeout_ms}")
        self._db = db
        self.row_cap = row_cap
        self.statement_timeout_ms = statement_timeout_ms

    def _begin(self) -> sql.Composed:
        """``BEGIN READ ONLY`` with the statement timeout, the pinned search path and the reader role, all local to
        the transaction."""
        statements = [
            sql.SQL("BEGIN READ ONLY"),
            sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(self.statement_timeout_ms)),
            sql.SQL("SET LOCAL search_path = pg_catalog, {}, pg_temp").format(sql.Identifier(self._db.schema)),
        ]
        if self._db.reader_role is not None:
            statements.append(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(self._db.reader_role)))
        return sql.SQL("; ").join(statements)

    async def run(self, query: str, params: Mapping[str, Any] | None = None) -> SqlResult:
        """Check and run one query. Raises ``SqlRefusedError`` (refused) or :class:`ToolError` (failed)."""
        checked = check_sql(query, params, tables=self._db.readable_tables, schema=self._db.schema)
        try:
            async with self._db.connection() as conn:
                # three round trips: the transaction set-up as one simple-protocol batch, the query, the rollback
                await conn.execute(self._begin())
                try:
                    cursor = await conn.execute(checked.sql, checked.params)
                    fetched = await cursor.fetchmany(self.row_cap + 1)
                finally:
                    # a failed statement leaves the transaction open; nothing to do if the query is still running
                    # (cancelled turn) or the connection is gone: the pool discards such connections
                    if conn.info.transaction_status in _OPEN:
                        await conn.execute("ROLLBACK")
        except psycopg.errors.QueryCanceled as exc:
            raise ToolError(
                "statement_timeout", f"the query ran longer than statement_timeout={self.statement_timeout_ms} ms"
            ) from exc
        except psycopg.Error as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ToolError("database_error", f"the database refused the query: {detail}") from exc
        rows = tuple({str(k): _plain(v) for k, v in row.items()} for row in fetched[: self.row_cap])
        return SqlResult(rows=rows, row_count=len(rows), truncated=len(fetched) > self.row_cap)
