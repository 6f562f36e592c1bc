"""The PostgreSQL backend of durable plan runs (``Store(db="postgresql://...")``), on psycopg 3.

The only module of :mod:`routegate.plan` that talks to a database driver; psycopg is imported here, when a store
is opened on a ``postgresql://`` URL, so plans without it never load the driver.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from routegate._extras import needs
from routegate.plan.checkpoint import HistoryKeep, Lease, SqlRunTable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS routegate_plan_runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    state JSONB NOT NULL
)
"""
_HISTORY = """
CREATE TABLE routegate_plan_history (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    state JSONB NOT NULL,
    PRIMARY KEY (key, seq)
)
"""


def _lock_id(key: str) -> int:
    """A stable signed 64-bit advisory-lock id for ``key``."""
    return int.from_bytes(hashlib.sha256(b"routegate.plan:" + key.encode()).digest()[:8], "big", signed=True)


# the advisory lock of the history migration: hashed apart from every run key's
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"routegate.plan.migration:history").digest()[:8], "big", signed=True)


class _SessionLease:
    """A key's advisory lock on the store's connection, and its entry in the store's in-process set (advisory
    locks are re-entrant within a session, so the set refuses a second run of this process)."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: PostgresCheckpoints, key: str) -> None:
        self._store: PostgresCheckpoints | None = store
        self._key = key

    def release(self) -> None:
        if self._store is not None:
            self._store._unlock(self._key)
            self._store = None


class PostgresCheckpoints(SqlRunTable):
    """Checkpoints in table ``routegate_plan_runs``; one autocommit connection per store (serialised by a lock).

    A lease is a session advisory lock on that connection: PostgreSQL drops it when the process (or the
    connection) dies, so a crashed run never blocks its resume."""

    # the document as text: psycopg's JSON decoding of one odd value (a number of 5,000 digits) would raise for the
    # whole listing; read_row reads it and names a problem instead
    _LOAD_SQL = "SELECT status, stop_reason, updated, state::text FROM routegate_plan_runs WHERE key = %s"
    _SAVE_SQL = (
        "INSERT INTO routegate_plan_runs (key, status, stop_reason, updated, state) "
        "VALUES (%s, %s, %s, %s, %s::jsonb) ON CONFLICT (key) DO UPDATE SET status = EXCLUDED.status, "
        "stop_reason = EXCLUDED.stop_reason, updated = EXCLUDED.updated, state = EXCLUDED.state"
    )
    _RUNS_SQL = "SELECT key, status, stop_reason, updated, state::text FROM routegate_plan_runs ORDER BY key"
    _DELETE_SQL = "DELETE FROM routegate_plan_runs WHERE key = %s"
    _NEXT_SQL = "SELECT COALESCE(MAX(seq), 0) + 1 FROM routegate_plan_history WHERE key = %s"
    _APPEND_SQL = (
        "INSERT INTO routegate_plan_history (key, seq, status, stop_reason, updated, state) "
        "VALUES (%s, %s, %s, %s, %s, %s::jsonb)"
    )
    _HISTORY_SQL = (
        "SELECT seq, status, stop_reason, updated, state FROM routegate_plan_history WHERE key = %s ORDER BY seq"
    )
    _RANGE_SQL = (
        "SELECT seq, status, stop_reason, updated, state::text FROM routegate_plan_history "
        "WHERE key = %s AND seq BETWEEN %s AND %s ORDER BY seq"
    )
    _PRUNE_SQL = "DELETE FROM routegate_plan_history WHERE key = %s AND seq < %s"
    _PRUNE_PATHS_SQL = "DELETE FROM routegate_plan_history WHERE key = %s AND seq < %s AND state ? '~path'"
    _STRIP_SQL = (
        "SELECT seq, state::text FROM routegate_plan_history WHERE key = %s AND seq >= %s AND seq < %s "
        "AND NOT state ? '~path' ORDER BY seq"
    )
    _REWRITE_SQL = "UPDATE routegate_plan_history SET state = %s::jsonb WHERE key = %s AND seq = %s"
    _FORGET_SQL = "DELETE FROM routegate_plan_history WHERE key = %s"
    # the latest checkpoint's head and its history row in one statement: one round trip, atomic in autocommit
    _SAVE_AND_APPEND_SQL = (
        "WITH head AS (INSERT INTO routegate_plan_runs (key, status, stop_reason, updated, state) "
        "VALUES (%(key)s, %(status)s, %(reason)s, %(updated)s, %(doc)s::jsonb) ON CONFLICT (key) DO UPDATE SET "
        "status = EXCLUDED.status, stop_reason = EXCLUDED.stop_reason, updated = EXCLUDED.updated, "
        "state = EXCLUDED.state) "
        "INSERT INTO routegate_plan_history (key, seq, status, stop_reason, updated, state) "
        "VALUES (%(key)s, %(seq)s, %(status)s, %(reason)s, %(updated)s, %(row)s::jsonb)"
    )

    def __init__(self, url: str, keep: HistoryKeep = None) -> None:
        with needs("desk"):
            import psycopg

        self._psycopg = psycopg
        self.url = url
        self.keep = keep
        self._at = {}
        self._mutex = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] = psycopg.connect(url, autocommit=True)
        self._conn.execute(_SCHEMA)
        self._migrate()
        self._held: set[str] = set()

    def _migrate(self) -> None:
        """Create the history table if the database has none (written before history existed, or new), each
        run's latest checkpoint becoming its first history row; one store at a time (a transaction lock)."""
        present = "SELECT to_regclass('routegate_plan_history') IS NOT NULL"
        if self._exists(present):
            return
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            if not self._exists(present):
                self._conn.execute(_HISTORY)
                self._conn.execute(
                    "INSERT INTO routegate_plan_history (key, seq, status, stop_reason, updated, state) "
                    "SELECT key, 1, status, stop_reason, updated, state FROM routegate_plan_runs"
                )

    def _exists(self, query: str) -> bool:
        row = self._conn.execute(query).fetchone()
        return bool(row and row[0])

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        with self._conn.transaction():
            yield

    def _save_and_append(
        self, key: str, status: str, stop_reason: str, now: float, head: str, seq: int, row: str
    ) -> None:
        values = {"key": key, "status": status, "reason": stop_reason, "updated": now, "doc": head, "seq": seq}
        self._conn.execute(self._SAVE_AND_APPEND_SQL, {**values, "row": row})

    def acquire(self, key: str) -> Lease | None:
        with self._mutex:
            if key in self._held:
                return None
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (_lock_id(key),)).fetchone()
            if row is None or not row[0]:
                return None
            self._held.add(key)
        return _SessionLease(self, key)

    def _unlock(self, key: str) -> None:
        with self._mutex:
            self._held.discard(key)
            if not self._conn.closed:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (_lock_id(key),))

    def close(self) -> None:
        with self._mutex:
            self._conn.close()
