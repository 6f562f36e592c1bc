"""PostgreSQL for the support desk: the embedded server, the connection pool, the schema and the seed data.

* :class:`EmbeddedPostgres` (defined in :mod:`.embedded`) starts PostgreSQL 16 with pgvector from the ``pgserver``
  package in a data directory, or attaches to the server another process already runs there (initdb about a
  second on first use, a start about 0.1 s, attaching milliseconds; the server stops when its last user leaves).
  ``DATABASE_URL`` replaces it with any PostgreSQL >= 14 that has pgvector.
* :class:`SupportDatabase` owns an async psycopg pool bound to one schema (``search_path = <schema>, public``):
  the tests give each test its own schema on one shared server. Commits are durable (``synchronous_commit`` as
  the server has it, ``on`` by default); ``asynchronous_commit=True`` lets a write return before its WAL flush,
  at the price of the last transactions before a database crash (measured in docs/benchmarks/server.md).
  Outside the pool it has two connections of its own, so that load on the pool never reaches them: the session
  locks' (:class:`~routegate.apps.support.advisory.AdvisoryLocks`, at most ``max_advisory_locks`` held at once) and
  the health check's (:meth:`SupportDatabase.ping`: a saturated pool is not a dead database). In front of the
  pool, :class:`~routegate.apps.support.fair_share.FairShare` hands connections out round robin between tenants
  (the server's API keys, named by the caller: :meth:`SupportDatabase.connection`), so one tenant's flood queues
  behind itself.
* :meth:`SupportDatabase.ensure_schema` is idempotent and cheap when nothing is missing (a few ms, the reader
  role's grants re-applied): the conversation memory, the spec's ``customers`` and ``tickets`` with their rows (the
  built-in desk's data, in the pool's own schema: what a desk built on one database reads), and the restricted
  read-only role used by the SQL tool when the server lets us create it (when it does not, a warning at start-up
  names the missing layer).
"""

from __future__ import annotations

import asyncio
import logging
import re
import warnings
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Final, cast

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

from routegate.apps.support._sqlallow import ALLOWED_TABLES
from routegate.apps.support.advisory import AdvisoryLocks
from routegate.apps.support.data import CUSTOMERS, TICKETS
from routegate.apps.support.embedded import DatabaseUnavailableError as DatabaseUnavailableError
from routegate.apps.support.embedded import EmbeddedPostgres as EmbeddedPostgres  # its home until it moved
from routegate.apps.support.fair_share import FairShare
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.errors import ConfigurationError

logger = logging.getLogger(__name__)

READER_ROLE: Final = "routegate_support_reader"
DEFAULT_SCHEMA: Final = "support"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

AsyncConn = psycopg.AsyncConnection[dict[str, Any]]


PROBE_TIMEOUT_SECONDS: Final = 3
"""Bound on the first, direct connection attempt at start-up (a host that does not answer)."""
HEALTH_TIMEOUT_SECONDS: Final = 2.0
"""Bound on one health check (:meth:`SupportDatabase.ping`), reconnecting included."""
HEALTH_STATEMENT_TIMEOUT_MS: Final = 1000
"""``statement_timeout`` of the health check's own connection: a database that is up answers ``SELECT 1`` at once."""
HEALTH_APPLICATION_NAME: Final = "routegate-health"
"""How the health check's connection shows in ``pg_stat_activity``."""


def check_schema_name(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise ConfigurationError(f"schema name must match {_SCHEMA_NAME.pattern}, got {schema!r}")
    return schema


class SupportDatabase:
    """An async connection pool on one schema, plus the support desk's DDL and seed data."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 10.0,
        acquire_timeout: float = 3.0,
        queue_timeout: float = 30.0,
        asynchronous_commit: bool = False,
        readable_tables: frozenset[str] = ALLOWED_TABLES,
        max_advisory_locks: int = 256,
    ) -> None:
        if not url:
            raise ConfigurationError("SupportDatabase needs a PostgreSQL URL")
        self.url = url
        self.schema = check_schema_name(schema)
        for table in readable_tables:
            if not isinstance(table, str) or not _SCHEMA_NAME.match(table):
                raise ConfigurationError(f"readable table names must match {_SCHEMA_NAME.pattern}, got {table!r}")
        self.readable_tables = frozenset(readable_tables)
        self.asynchronous_commit = asynchronous_commit
        self.reader_role: str | None = None
        self._warned_no_reader_role = False
        self._connect_timeout = connect_timeout
        options = f"-c search_path={self.schema},public"
        if asynchronous_commit:
            # opt-in: a commit returns before its WAL is flushed; a database crash may lose the last turns of chat
            # memory (never corrupt a table)
            options += " -c synchronous_commit=off"
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            # how long a caller waits for a connection: short, so that a database that went away is reported
            # (database_unavailable) within seconds instead of after psycopg_pool's default 30 s
            timeout=acquire_timeout,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "options": options,
            },
            name=f"routegate-support-{self.schema}",
        )
        # in front of the pool, one slot per connection handed out round robin between tenants (the pool's own
        # queue is first come, first served): a tenant's flood waits behind itself, not in front of the others.
        # A wait ends as PoolTimeout after acquire_timeout with no connection freed, or queue_timeout in all
        self._share = FairShare(max_size, stall_seconds=acquire_timeout, max_wait_seconds=queue_timeout)
        # cross-process locks (a session's turns, one at a time) on a connection of their own, opened on first use
        self.locks = AdvisoryLocks(url, connect_timeout=connect_timeout, max_held=max_advisory_locks)
        # the health check's own connection, outside the pool: a saturated pool is not a dead database
        self._health: psycopg.AsyncConnection[Any] | None = None
        self._ping_task: asyncio.Task[bool] | None = None
        self._health_lost = True  # the database was not seen up since the last failed check (or ever)
        self._closing = False

    async def open(self) -> None:
        """Connect once directly, then open the pool. The pool retries quietly until its timeout and then says only
        "pool initialization incomplete"; the direct attempt fails at once with the cause (refused, unknown host,
        bad password) and is bounded by :data:`PROBE_TIMEOUT_SECONDS`."""
        try:
            psycopg.conninfo.conninfo_to_dict(self.url)
        except psycopg.ProgrammingError:
            # the text is not echoed: it may hold a password
            raise ConfigurationError(
                "the database URL is not a PostgreSQL URL or connection string; "
                "use postgresql://user:password@host:5432/dbname"
            ) from None
        timeout = max(2, min(PROBE_TIMEOUT_SECONDS, round(self._connect_timeout)))
        try:
            async with asyncio.timeout(timeout + 1):
                probe = await psycopg.AsyncConnection.connect(self.url, connect_timeout=timeout)
        except (psycopg.Error, OSError, TimeoutError) as exc:
            cause = " ".join(str(exc).split())[:300] or f"no answer within {timeout} s"
            raise DatabaseUnavailableError(f"could not connect to PostgreSQL: {cause}") from exc
        await probe.close()
        try:
            await self._pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            raise DatabaseUnavailableError(f"could not connect to PostgreSQL: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        self._closing = True
        if self._ping_task is not None and not self._ping_task.done():
            self._ping_task.cancel()
            await asyncio.wait([self._ping_task])
        await self._drop_health()
        await self.locks.close()
        await self._pool.close()

    async def __aenter__(self) -> SupportDatabase:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def connection(self, tenant: str = ANONYMOUS) -> AbstractAsyncContextManager[AsyncConn]:
        """``async with db.connection(tenant) as conn`` — a pooled autocommit connection with dict rows, taken in
        ``tenant``'s turn (:mod:`~routegate.apps.support.fair_share`); ``PoolTimeout`` when none came free."""
        return self._shared_connection(tenant)

    def waiting(self, tenant: str | None = None) -> int:
        """How many callers wait in the fair queue for a pooled connection: all of them, or ``tenant``'s."""
        return self._share.waiting(tenant)

    @asynccontextmanager
    async def _shared_connection(self, tenant: str) -> AsyncIterator[AsyncConn]:
        await self._share.acquire(tenant)
        try:
            async with self._pool.connection() as conn:
                # the pool is built with row_factory=dict_row, which its type parameters cannot express
                yield cast("AsyncConn", conn)
        finally:
            self._share.release()

    async def ping(self) -> bool:
        """Whether the database answers ``SELECT 1``, within :data:`HEALTH_TIMEOUT_SECONDS`, on a connection of
        its own outside the pool: turns that hold or wait for every pooled connection cannot make the database
        look down. Callers that ask while a check runs share its answer (a burst of failing turns costs one
        check), and a caller that gives up does not cancel it for the others."""
        if self._closing or self._pool.closed:
            return False  # closed (or never opened): no query of the desk's would work
        task = self._ping_task
        if task is None or task.done():
            task = self._ping_task = asyncio.ensure_future(self._ping())
        return await asyncio.shield(task)

    async def _ping(self) -> bool:
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_SECONDS):
                fresh = self._health is None or self._health.closed
                try:
                    await (await self._health_connection()).execute("SELECT 1")
                except psycopg.OperationalError:
                    await self._drop_health()
                    if fresh:
                        raise
                    # the connection was opened before the database restarted: one more try on a new one
                    self._health_lost = True
                    await (await self._health_connection()).execute("SELECT 1")
                if self._health_lost:
                    # the database is up again (or seen for the first time): the pool's idle connections from
                    # before an outage are replaced now, so that "healthy" means the next turn's queries work too
                    await self._pool.check()
                    self._health_lost = False
        except Exception as exc:
            logger.debug("health check failed: %s", type(exc).__name__)
            await self._drop_health()
            self._health_lost = True
            return False
        return True

    async def _health_connection(self) -> psycopg.AsyncConnection[Any]:
        if self._health is None or self._health.closed:
            self._health = await psycopg.AsyncConnection.connect(
                self.url,
                autocommit=True,
                connect_timeout=max(1, round(HEALTH_TIMEOUT_SECONDS)),
                application_name=HEALTH_APPLICATION_NAME,
                options=f"-c statement_timeout={HEALTH_STATEMENT_TIMEOUT_MS}",
            )
        return self._health

    async def _drop_health(self) -> None:
        conn, self._health = self._health, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # pragma: no cover - closing a broken connection
                logger.debug("closing the health-check connection failed", exc_info=True)

    # -- schema --------------------------------------------------------------------------------------------
    async def ensure_schema(self, *, embedding_dim: int | None = None) -> None:
        """Create the extension, schema, tables, indexes and seed rows if missing. Safe to run repeatedly.
        ``embedding_dim`` is not used any more (the help articles are the knowledge base's, ingested by the desk:
        :func:`routegate.apps.configured.kb.ingest`); passing it warns, and the parameter goes in the next release."""
        if embedding_dim is not None:
            warnings.warn(
                "SupportDatabase.ensure_schema(embedding_dim=...) is not used any more: the help articles are the "
                "desk's knowledge base (ingested when the desk starts); call ensure_schema() without it. The "
                "parameter goes in the next release.",
                DeprecationWarning,
                stacklevel=2,
            )
        schema = sql.Identifier(self.schema)
        async with self.connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.support.schema'))")
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                for statement in _DDL:
                    await conn.execute(statement)
                await self._seed(conn)
            self.reader_role = await self._ensure_reader_role(conn)

    async def _seed(self, conn: AsyncConn) -> None:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO customers (id, name, city) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                [(c.id, c.name, c.city) for c in CUSTOMERS],
            )
            await cur.executemany(
                "INSERT INTO tickets (id, customer_id, issue, status) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                [(t.id, t.customer_id, t.issue, t.status) for t in TICKETS],
            )

    async def _ensure_reader_role(self, conn: AsyncConn) -> str | None:
        """A NOLOGIN role that may only SELECT the readable tables; ``None`` if the server does not allow it."""
        schema = sql.Identifier(self.schema)
        role = sql.Identifier(READER_ROLE)
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.support.role'))")
                cur = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER_ROLE,))
                if await cur.fetchone() is None:
                    await conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOINHERIT").format(role))
                await conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
                tables = sql.SQL(", ").join(sql.Identifier(self.schema, name) for name in sorted(self.readable_tables))
                await conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(tables, role))
                cur = await conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER') AS member", (READER_ROLE,))
                found = await cur.fetchone()
                if not (found and found["member"]):  # an administrator may have granted it already
                    await conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(role))
        except psycopg.errors.InsufficientPrivilege as exc:
            if not self._warned_no_reader_role:
                self._warned_no_reader_role = True
                logger.warning(
                    "the database login may not create the role %s (%s): the SQL tool runs WITHOUT its reader-role "
                    "layer (database-enforced SELECT on %s only); the SQL guard, the read-only transaction, the "
                    "statement timeout and the pinned search_path still apply. Create the role as an administrator "
                    "(see docs/security.md) to restore the layer.",
                    READER_ROLE,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    ", ".join(sorted(self.readable_tables)),
                )
            return None
        return READER_ROLE


async def embedding_type(conn: AsyncConn, schema: str, table: str) -> str | None:
    """The type of the ``embedding`` column of ``schema.table`` (``vector(384)``); ``None`` when there is none yet.
    A table whose type is not the encoder's dimension is rebuilt: its vectors are derived data."""
    cur = await conn.execute(
        "SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) AS type FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding'",
        (schema, table),
    )
    found = await cur.fetchone()
    return None if found is None else str(found["type"])


_HISTORY_LAST: Final = (
    "SELECT id, role, content, created_at, context FROM {table} WHERE session_id = {session}"
    " ORDER BY id DESC LIMIT {limit}"
)
HISTORY_QUERY: Final = (
    "SELECT role, content, extract(epoch FROM created_at)::float8 AS at, context FROM ("
    + _HISTORY_LAST
    + ") AS last ORDER BY id"
)
"""A session's last messages, oldest first: the pool's history read (:meth:`MessageStore.recent
<routegate.apps.support.memory.MessageStore.recent>`); :data:`HISTORY_FUNCTION` reads the same rows."""
HISTORY_FUNCTION: Final = "support_history"
"""``<schema>.support_history(session, max_messages)``: what :data:`HISTORY_QUERY` reads (the same last messages,
the same values, oldest first), as one JSON array of ``[role, content, at, context]``, which the session lock's take
calls for each session it grants (:mod:`~routegate.apps.support.memory`). VOLATILE, so that its query takes its
snapshot when it runs, after the lock was granted in the same statement (the statement's own snapshot is older: it
would miss what the lock's previous holder committed just before letting go). It never waits: while another session
holds the table in a mode a read waits for (``LOCK TABLE``, most ``ALTER TABLE``, ``VACUUM FULL``), it returns
``NULL`` at once ("not read"), and the turn reads its history on the pool."""

MEMORY_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS support_messages ("
    " id bigserial PRIMARY KEY, session_id text NOT NULL,"
    " role text NOT NULL CHECK (role IN ('user', 'assistant')), content text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX IF NOT EXISTS support_messages_session ON support_messages (session_id, id DESC)",
    # what an answered turn established (the follow-up resolver's context); added to tables made before it, the
    # catalog looked at first so that a start with the column in place takes no lock on the table
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute"
    " WHERE attrelid = 'support_messages'::regclass AND attname = 'context' AND NOT attisdropped)"
    " THEN ALTER TABLE support_messages ADD COLUMN context jsonb; END IF; END $$",
    # the history read that comes with a session lock's take, on the locks' connection (no search path of the
    # desk's there: the function names its table with the schema it is created in). Its own search path: on a
    # database where other roles may create in public (the default before PostgreSQL 15), the caller's path would
    # let another role's better-matching overload (of jsonb_build_array, say) run as the desk's login, with the
    # session's messages; the functions it calls are named with their schema too
    "DO $$ BEGIN EXECUTE format("
    "'CREATE OR REPLACE FUNCTION %1$I." + HISTORY_FUNCTION + "(session text, max_messages integer) RETURNS jsonb"
    " LANGUAGE plpgsql VOLATILE STRICT SET search_path = pg_catalog, pg_temp AS $body$ BEGIN"
    " LOCK TABLE %1$I.support_messages IN ACCESS SHARE MODE NOWAIT;"
    " RETURN (SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(last.role, last.content,"
    " extract(epoch FROM last.created_at)::float8, last.context) ORDER BY last.id), ''[]'') FROM ("
    + _HISTORY_LAST.format(table="%1$I.support_messages", session="session", limit="max_messages")
    + ") AS last); EXCEPTION WHEN lock_not_available THEN RETURN NULL; END $body$', current_schema());"
    " EXECUTE format('REVOKE ALL ON FUNCTION %1$I." + HISTORY_FUNCTION + "(text, integer) FROM PUBLIC',"
    " current_schema()); END $$",
)
"""The conversation memory's table (:class:`~routegate.apps.support.memory.MessageStore`) and its history read as
a function (:data:`HISTORY_FUNCTION`), in the schema on the search path: every desk, built-in or configured, keeps
its memory in this one shape."""

_DDL: Final = (
    "CREATE TABLE IF NOT EXISTS customers (id integer PRIMARY KEY, name text NOT NULL, city text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tickets ("
    " id integer PRIMARY KEY, customer_id integer NOT NULL REFERENCES customers (id),"
    " issue text NOT NULL, status text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS tickets_customer_id ON tickets (customer_id)",
    *MEMORY_DDL,
)
