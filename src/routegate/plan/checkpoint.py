"""Where durable plan runs keep their checkpoints: one small protocol, three backends.

A checkpoint is one JSON document per ``checkpoint_key`` (see :mod:`routegate.plan.durable` for what it holds),
overwritten after every step: the run's latest. Every checkpoint is also appended to the run's *history*
(:meth:`CheckpointLog.append`, :mod:`routegate.plan.history`), kept until the run is deleted unless the store keeps
less (``Store(history=...)``); history rows are numbered from 1 per key and stored as the changes since the row
before (:mod:`routegate.plan._deltas`). Tables written before history existed are migrated when a store opens
them: the history table is created and each run's latest checkpoint becomes its first history row. A backend also
hands out *leases*: at most one live run per key. A lease is tied
to the process that holds it and disappears when that process dies, so a crashed run never blocks its resume:

* :class:`MemoryCheckpoints` — a dict in this process (``Store()``); leases are a set of keys.
* :class:`SqliteCheckpoints` — a SQLite file (``Store(db="plans.sqlite")``, stdlib :mod:`sqlite3`); a lease is an
  exclusive ``flock`` on a lock file next to the database (``plans.sqlite.locks/<hash>``), which the OS drops
  when the process exits, however it exits. Lock files are opened without following symbolic links.
* ``PostgresCheckpoints`` — ``Store(db="postgresql://...")`` (:mod:`routegate.plan._pg`, psycopg 3); a lease is a
  session advisory lock held on a connection of its own, which PostgreSQL drops when that session ends.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from routegate.errors import RuntimeFaultError
from routegate.plan._deltas import Kept, pruned_below, stored_row, whole_at

RUNNING, ENDED, INTERRUPTED = "running", "ended", "interrupted"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One key's checkpoint as stored: ``status`` (running / ended / interrupted), the stop reason of an ended or
    interrupted run, when it was last written (Unix seconds) and the checkpoint document itself.

    ``problem`` says why a row could not be read (its document is not a JSON object, a column has the wrong
    type); such a record has an empty ``state``, is listed, and is refused by a resume."""

    key: str
    status: str
    stop_reason: str
    updated: float
    state: dict[str, Any]
    problem: str | None = None


MAX_INT_DIGITS = 4_000
"""The longest integer a stored document is read with (Python reads at most 4,300 digits): a longer one, which
routegate never writes (:func:`~routegate.core.contracts.jsonable` writes a marker instead) but another writer of
the store may, is read as a marker string too."""


def _int(text: str) -> int | str:
    digits = len(text) - text.startswith("-")
    return int(text) if digits <= MAX_INT_DIGITS else f"<integer of {digits} digits>"


def loads(doc: str | bytes) -> Any:
    """A stored document: JSON whose integers of more than :data:`MAX_INT_DIGITS` digits are read as markers."""
    return json.loads(doc, parse_int=_int)


def read_row(key: object, status: object, stop_reason: object, updated: object, state: object) -> RunRecord:
    """A stored row as a :class:`RunRecord`; a row that does not parse comes back with its ``problem`` named
    instead of raising, so one damaged row never hides the others. ``state`` is the document's text (a backend
    reads it as text, never through its driver's JSON decoding, which would raise for the whole listing)."""
    shown = key if isinstance(key, str) else repr(key)
    if isinstance(state, str | bytes):
        try:
            state = loads(state)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
            return RunRecord(shown, str(status), str(stop_reason), 0.0, {}, f"its document is not JSON ({exc})")
    problem = None
    if not isinstance(key, str):
        problem = f"its key is {type(key).__name__}, not text"
    elif not isinstance(status, str) or not isinstance(stop_reason, str):
        problem = "its status or stop reason is not text"
    elif not isinstance(updated, int | float) or isinstance(updated, bool) or not math.isfinite(updated):
        problem = f"its time of writing is {updated!r}, not a number"
    elif not isinstance(state, dict):
        problem = f"its document is a JSON {type(state).__name__}, not an object"
    if problem is not None:
        return RunRecord(shown, str(status), str(stop_reason), 0.0, {}, problem)
    assert isinstance(state, dict) and isinstance(updated, int | float)
    return RunRecord(shown, str(status), str(stop_reason), float(updated), state)


class Lease(Protocol):
    def release(self) -> None: ...


@runtime_checkable
class Checkpoints(Protocol):
    """The storage protocol of durable runs."""

    def load(self, key: str) -> RunRecord | None: ...

    def save(self, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None: ...

    def runs(self) -> list[RunRecord]: ...

    def delete(self, key: str) -> None: ...

    def acquire(self, key: str) -> Lease | None:
        """The lease of ``key``, or ``None`` when a live run holds it."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class CheckpointLog(Protocol):
    """A backend that keeps a run's history: every checkpoint, not only the latest (the three backends here)."""

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        """Save ``state`` as the run's latest checkpoint and append it to its history, in one transaction.
        ``kept``: the first envelopes and decisions of ``state`` are those of the checkpoint this writer appended
        before (``None``: it is the first of this attempt, stored whole)."""
        ...

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        """The history rows of ``key`` in order, numbered (:func:`routegate.plan.history.read_history` rebuilds
        the checkpoints from them)."""
        ...


HistoryKeep = int | None
"""How much history a backend keeps: ``None`` every checkpoint until the run is deleted, ``0`` none (only the
latest checkpoint), ``N`` at least the latest ``N`` of each run (pruned a block of ``N`` at a time)."""


def dumps(state: dict[str, Any]) -> str:
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"))


class _SqlCursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...


class _SqlConnection(Protocol):
    """What :class:`SqlRunTable` needs of a DB-API connection (sqlite3's and psycopg's both fit)."""

    def execute(self, sql: str, params: Any = ..., /) -> _SqlCursor: ...


class _KeyLease:
    __slots__ = ("_held", "_key")

    def __init__(self, held: set[str], key: str) -> None:
        self._held, self._key = held, key

    def release(self) -> None:
        self._held.discard(self._key)


class MemoryCheckpoints:
    """Checkpoints in a dict of this process (documents kept as JSON text, so they are copies)."""

    def __init__(self, keep: HistoryKeep = None) -> None:
        self._rows: dict[str, tuple[str, str, float, str]] = {}
        self._log: dict[str, list[tuple[int, str, str, float, str]]] = {}
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self.keep = keep

    def load(self, key: str) -> RunRecord | None:
        row = self._rows.get(key)
        if row is None:
            return None
        status, reason, updated, doc = row
        return read_row(key, status, reason, updated, doc)

    def save(self, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None:
        self._rows[key] = (status, stop_reason, time.time(), dumps(state))

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        now, doc = time.time(), dumps(state)
        with self._lock:
            self._rows[key] = (status, stop_reason, now, doc)
            keep = self.keep
            if keep == 0:
                return
            rows = self._log.setdefault(key, [])
            seq = rows[-1][0] + 1 if rows else 1
            row = stored_row(state, None if whole_at(seq, keep) else kept)
            rows.append((seq, status, stop_reason, now, doc if row is state else dumps(row)))
            if keep is not None and whole_at(seq, keep):
                rows[:] = [r for r in rows if r[0] >= pruned_below(seq, keep)]

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        with self._lock:
            rows = list(self._log.get(key, ()))
        return [(seq, read_row(key, status, reason, updated, doc)) for seq, status, reason, updated, doc in rows]

    def runs(self) -> list[RunRecord]:
        return [r for r in (self.load(k) for k in sorted(self._rows)) if r is not None]

    def delete(self, key: str) -> None:
        with self._lock:
            self._rows.pop(key, None)
            self._log.pop(key, None)

    def acquire(self, key: str) -> Lease | None:
        with self._lock:
            if key in self._held:
                return None
            self._held.add(key)
        return _KeyLease(self._held, key)

    def close(self) -> None:
        return None


class _FileLease:
    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1


_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS plan_runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated REAL NOT NULL,
    state TEXT NOT NULL
)
"""
_SQLITE_HISTORY = """
CREATE TABLE plan_history (
    key TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated REAL NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (key, seq)
) WITHOUT ROWID
"""


class SqlRunTable:
    """The row logic the SQL backends share: load, save, list and delete a run's row, append to and read its history,
    under one mutex. A backend sets the statements in its own dialect (table names, placeholders), ``_conn``,
    ``_mutex`` and ``keep``, and says how it runs statements as one transaction (:meth:`_atomic`)."""

    _LOAD_SQL: str  # (key) -> status, stop_reason, updated, state
    _SAVE_SQL: str  # (key, status, stop_reason, updated, state): insert, or update the row of that key
    _RUNS_SQL: str  # () -> key, status, stop_reason, updated, state, ordered by key
    _DELETE_SQL: str  # (key)
    _NEXT_SQL: str  # (key) -> the number of the key's next history row
    _APPEND_SQL: str  # (key, seq, status, stop_reason, updated, state)
    _APPEND_NEXT_SQL: (
        str  # (key, status, stop_reason, updated, state, key): the key's next row, numbered in the statement
    )
    _HISTORY_SQL: str  # (key) -> seq, status, stop_reason, updated, state, ordered by seq
    _PRUNE_SQL: str  # (key, seq): delete the key's history rows numbered below seq
    _FORGET_SQL: str  # (key): delete the key's history
    _conn: _SqlConnection
    _mutex: threading.Lock
    keep: HistoryKeep = None

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """The statements run inside as one transaction."""
        raise NotImplementedError  # pragma: no cover

    def load(self, key: str) -> RunRecord | None:
        with self._mutex:
            row = self._conn.execute(self._LOAD_SQL, (key,)).fetchone()
        if row is None:
            return None
        return read_row(key, *row)

    def save(self, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None:
        doc = dumps(state)
        with self._mutex:
            self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, time.time(), doc))

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        doc, now, keep = dumps(state), time.time(), self.keep
        if keep == 0:
            with self._mutex:
                self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, now, doc))
            return
        if keep is None:  # whole or not does not depend on the row's number
            row = stored_row(state, kept)
            with self._mutex:
                self._save_and_append(key, status, stop_reason, now, doc, doc if row is state else dumps(row))
            return
        with self._mutex, self._atomic():
            self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, now, doc))
            seq = int(self._conn.execute(self._NEXT_SQL, (key,)).fetchone()[0])
            row = stored_row(state, None if whole_at(seq, keep) else kept)
            text = doc if row is state else dumps(row)
            self._conn.execute(self._APPEND_SQL, (key, seq, status, stop_reason, now, text))
            if whole_at(seq, keep):
                self._conn.execute(self._PRUNE_SQL, (key, pruned_below(seq, keep)))

    def _save_and_append(self, key: str, status: str, stop_reason: str, now: float, doc: str, row: str) -> None:
        """Save ``doc`` as the latest checkpoint of ``key`` and append ``row`` as its next history row, atomically
        (the caller holds the mutex)."""
        with self._atomic():
            self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, now, doc))
            self._conn.execute(self._APPEND_NEXT_SQL, (key, status, stop_reason, now, row, key))

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        with self._mutex:
            rows = self._conn.execute(self._HISTORY_SQL, (key,)).fetchall()
        return [(seq, read_row(key, status, reason, updated, state)) for seq, status, reason, updated, state in rows]

    def runs(self) -> list[RunRecord]:
        with self._mutex:
            rows = self._conn.execute(self._RUNS_SQL).fetchall()
        return [read_row(*row) for row in rows]

    def delete(self, key: str) -> None:
        """Delete the run of ``key``: its latest checkpoint and its history."""
        with self._mutex, self._atomic():
            self._conn.execute(self._DELETE_SQL, (key,))
            self._conn.execute(self._FORGET_SQL, (key,))


class SqliteCheckpoints(SqlRunTable):
    """Checkpoints in a SQLite file; one connection per store, serialised by a lock (WAL journal)."""

    _LOAD_SQL = "SELECT status, stop_reason, updated, state FROM plan_runs WHERE key = ?"
    _SAVE_SQL = (
        "INSERT INTO plan_runs (key, status, stop_reason, updated, state) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(key) DO UPDATE SET status = excluded.status, stop_reason = excluded.stop_reason, "
        "updated = excluded.updated, state = excluded.state"
    )
    _RUNS_SQL = "SELECT key, status, stop_reason, updated, state FROM plan_runs ORDER BY key"
    _DELETE_SQL = "DELETE FROM plan_runs WHERE key = ?"
    _NEXT_SQL = "SELECT COALESCE(MAX(seq), 0) + 1 FROM plan_history WHERE key = ?"
    _APPEND_SQL = "INSERT INTO plan_history (key, seq, status, stop_reason, updated, state) VALUES (?, ?, ?, ?, ?, ?)"
    _APPEND_NEXT_SQL = (
        "INSERT INTO plan_history (key, seq, status, stop_reason, updated, state) "
        "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM plan_history WHERE key = ?"
    )
    _HISTORY_SQL = "SELECT seq, status, stop_reason, updated, state FROM plan_history WHERE key = ? ORDER BY seq"
    _PRUNE_SQL = "DELETE FROM plan_history WHERE key = ? AND seq < ?"
    _FORGET_SQL = "DELETE FROM plan_history WHERE key = ?"

    def __init__(self, path: str, keep: HistoryKeep = None) -> None:
        self.path = path
        self.keep = keep
        self._locks = Path(path + ".locks")
        self._mutex = threading.Lock()
        self._conn: sqlite3.Connection = sqlite3.connect(
            path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(_SQLITE_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Create the history table if this file has none (written before history existed, or new), each run's
        latest checkpoint becoming its first history row."""
        present = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'plan_history'"
        if self._conn.execute(present).fetchone() is not None:
            return
        with self._atomic():  # another process may be migrating the same file: look again under the write lock
            if self._conn.execute(present).fetchone() is None:
                self._conn.execute(_SQLITE_HISTORY)
                self._conn.execute(
                    "INSERT INTO plan_history (key, seq, status, stop_reason, updated, state) "
                    "SELECT key, 1, status, stop_reason, updated, state FROM plan_runs"
                )

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def acquire(self, key: str) -> Lease | None:
        """Lock ``<db>.locks/<first 32 hex digits of sha256(key)>``. Neither the directory nor the file is
        reached through a symbolic link: one planted there (to make the lock create or open a file elsewhere)
        is refused with :class:`~routegate.errors.RuntimeFaultError`."""
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        directory = self._lock_dir()
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory)
        except OSError as exc:
            raise _refused(self._locks / name, "lock file", exc) from exc
        finally:
            os.close(directory)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return _FileLease(fd)

    def _lock_dir(self) -> int:
        """A descriptor of ``<db>.locks`` (created 0700 if missing), opened without following a link."""
        try:
            self._locks.mkdir(mode=0o700, exist_ok=True)
            return os.open(self._locks, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise _refused(self._locks, "lock directory", exc) from exc

    def close(self) -> None:
        with self._mutex:
            self._conn.close()


def _refused(path: Path, what: str, exc: OSError) -> RuntimeFaultError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) or path.is_symlink():
        return RuntimeFaultError(
            f"the {what} {str(path)!r} of a durable run is a symbolic link; routegate does not follow links "
            "there (one may have been planted to make the lock open another file): remove it and run again"
        )
    return RuntimeFaultError(f"cannot open the {what} {str(path)!r} of a durable run: {exc.strerror or exc}")
