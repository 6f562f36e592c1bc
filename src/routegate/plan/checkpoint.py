"""Where durable plan runs keep their checkpoints: one small protocol, three backends.

A checkpoint is one JSON document per ``checkpoint_key`` (see :mod:`routegate.plan.durable` for what it holds),
written before every step: the run's latest. Every checkpoint is also appended to the run's *history*
(:meth:`CheckpointLog.append`, :mod:`routegate.plan.history`), kept until the run is deleted unless the store keeps
less (``Store(history=...)``); history rows are numbered from 1 per key and stored as the changes since the row
before (:mod:`routegate.plan._deltas`). The row of the latest checkpoint is a *head*: the checkpoint without its
path, naming the history rows its path is rebuilt from (a store that keeps no history appends path rows for it), so
a step writes what changed, never the whole path; :meth:`Checkpoints.load` hands back the checkpoint whole. A latest
checkpoint written whole (before heads existed, or with :meth:`Checkpoints.save`) is read as it is. Tables written
before history existed are migrated when a store opens them: the history table is created and each run's latest
checkpoint becomes its first history row. A backend also
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

import bisect
import errno
import fcntl
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from routegate.errors import RuntimeFaultError
from routegate.plan._deltas import (
    PATH_ONLY,
    Damaged,
    Kept,
    head_row,
    head_rows,
    is_head,
    path_row,
    pruned_below,
    rebuilt_head,
    stored_row,
    stripped,
    whole_at,
)

RUNNING, ENDED, INTERRUPTED = "running", "ended", "interrupted"
R = TypeVar("R")


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

    def runs(self, *, whole: bool = True) -> list[RunRecord]:
        """Every run's latest checkpoint, by key. ``whole=False``: as stored, a head's path not rebuilt from the
        history rows (what a listing of the runs reads: status, next step, result; no read of their history)."""
        ...

    def delete(self, key: str) -> None: ...

    def acquire(self, key: str) -> Lease | None:
        """The lease of ``key``, or ``None`` when a live run holds it."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class CheckpointLog(Protocol):
    """A backend that keeps a run's history: every checkpoint, not only the latest (the three backends here)."""

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        """Save ``state`` as the run's latest checkpoint and append it to its history, in one transaction, writing
        what changed since the checkpoint before rather than the whole path.
        ``kept``: the first envelopes and decisions of ``state`` are those of the checkpoint this writer appended
        before (``None``: it is the first of this attempt, stored whole). Only the holder of the key's lease
        appends to it."""
        ...

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        """The history rows of ``key`` in order, numbered, path rows included (:func:`routegate.plan.history.
        read_history` rebuilds the checkpoints from them and leaves path rows out)."""
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


class _Appending:
    """Where a writer's attempt at a key stands: the history row its latest checkpoint's path is rebuilt from
    (whole) and the number of the next row. Kept by the backend for the key's lease holder only: an attempt's first
    checkpoint (``kept`` is ``None``) reads the number from the store again."""

    __slots__ = ("first", "next")

    def __init__(self, first: int, next_seq: int) -> None:
        self.first, self.next = first, next_seq


def _rows_for(
    state: dict[str, Any], kept: Kept | None, seq: int, keep: HistoryKeep, at: _Appending | None
) -> tuple[dict[str, Any], dict[str, Any], int, bool]:
    """The history row (a path row when the store keeps no history) and the head of checkpoint ``state`` written as
    row ``seq``; the row its path is rebuilt from; whether the row is whole (an attempt's first)."""
    whole = kept is None or at is None
    first = seq if whole or at is None else at.first
    base = None if whole else kept
    row = path_row(state, base) if keep == 0 else stored_row(state, base)
    return row, head_row(state, first, seq), first, whole


def _settled(read: Callable[[], R | None], whole: Callable[[str, R], RunRecord], key: str) -> RunRecord | None:
    """The latest checkpoint of ``key``: its row (``read``) made whole. A head whose rows do not rebuild it is read
    again if its row changed meanwhile (a writer began another attempt between the two reads, pruning the rows the
    head read first named); a row that stays the same is what the store holds."""
    row = read()
    for _ in range(3):
        if row is None:
            return None
        record = whole(key, row)
        again = read() if record.problem is not None else row
        if again == row:
            return record
        row = again
    return None if row is None else whole(key, row)


def _rebuilt(key: str, record: RunRecord, rows: list[tuple[int, RunRecord]]) -> RunRecord:
    """``record`` (a head) with its checkpoint rebuilt from ``rows``, or naming why it cannot be."""
    try:
        state = rebuilt_head(record.state, ((seq, None if r.problem else r.state) for seq, r in rows))
    except Damaged as exc:
        problem = f"its path cannot be rebuilt from its history rows: {exc}"
        return RunRecord(record.key, record.status, record.stop_reason, record.updated, {}, problem)
    return RunRecord(record.key, record.status, record.stop_reason, record.updated, state)


class MemoryCheckpoints:
    """Checkpoints in a dict of this process (documents kept as JSON text, so they are copies)."""

    def __init__(self, keep: HistoryKeep = None) -> None:
        self._rows: dict[str, tuple[str, str, float, str]] = {}
        self._log: dict[str, list[tuple[int, str, str, float, str]]] = {}
        self._at: dict[str, _Appending] = {}
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self.keep = keep

    def load(self, key: str) -> RunRecord | None:
        return _settled(lambda: self._rows.get(key), self._whole, key)

    def _whole(self, key: str, row: tuple[str, str, float, str]) -> RunRecord:
        status, reason, updated, doc = row
        record = read_row(key, status, reason, updated, doc)
        if record.problem is not None or not is_head(record.state):
            return record
        try:
            first, last = head_rows(record.state)
        except Damaged:
            return _rebuilt(key, record, [])
        with self._lock:
            rows = [r for r in self._log.get(key, ()) if first <= r[0] <= last]
        return _rebuilt(key, record, [(r[0], read_row(key, *r[1:])) for r in rows])

    def save(self, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None:
        with self._lock:
            self._rows[key] = (status, stop_reason, time.time(), dumps(state))

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        now, keep = time.time(), self.keep
        with self._lock:
            rows = self._log.setdefault(key, [])
            at = None if kept is None else self._at.get(key)
            seq = at.next if at is not None else (rows[-1][0] + 1 if rows else 1)
            row, head, first, whole = _rows_for(state, kept, seq, keep, at)
            self._rows[key] = (status, stop_reason, now, dumps(head))
            if whole:  # the path rows of earlier attempts are no longer read
                rows[:] = [r for r in rows if not r[4].startswith(_PATH_ROW)]
            rows.append((seq, status, stop_reason, now, dumps(row)))
            if keep is not None and keep > 0 and whole_at(seq, keep):
                below = pruned_below(seq, keep)
                del rows[: bisect.bisect_left(rows, min(below, first), key=_number)]
                # this attempt's rows that left the kept ones since the last block become path rows
                at_row = bisect.bisect_left(rows, max(first, below - keep), key=_number)
                while at_row < len(rows) and rows[at_row][0] < below:
                    rows[at_row] = (*rows[at_row][:4], _stripped_text(rows[at_row][4]))
                    at_row += 1
            self._at[key] = _Appending(first, seq + 1)

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        with self._lock:
            rows = list(self._log.get(key, ()))
        return [(seq, read_row(key, status, reason, updated, doc)) for seq, status, reason, updated, doc in rows]

    def runs(self, *, whole: bool = True) -> list[RunRecord]:
        if whole:
            return [r for r in (self.load(k) for k in sorted(self._rows)) if r is not None]
        with self._lock:
            rows = sorted(self._rows.items())
        return [read_row(key, *row) for key, row in rows]

    def delete(self, key: str) -> None:
        with self._lock:
            self._rows.pop(key, None)
            self._log.pop(key, None)
            self._at.pop(key, None)

    def acquire(self, key: str) -> Lease | None:
        with self._lock:
            if key in self._held:
                return None
            self._held.add(key)
        return _KeyLease(self._held, key)

    def close(self) -> None:
        return None


def _number(row: tuple[int, str, str, float, str]) -> int:
    return row[0]


_PATH_ROW = dumps({PATH_ONLY: 1})[:-1]
"""How the text of every path row starts (``dumps`` keeps the order the row was built in)."""


def _stripped_text(text: str) -> str:
    """A history row's text as a path row's (:func:`~routegate.plan._deltas.stripped`); one that does not parse is
    left as it is (the rows after it cannot be rebuilt either way)."""
    if text.startswith(_PATH_ROW):
        return text
    try:
        row = loads(text)
    except (ValueError, RecursionError):
        return text
    return dumps(stripped(row)) if isinstance(row, dict) else text


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
    _HISTORY_SQL: str  # (key) -> seq, status, stop_reason, updated, state, ordered by seq
    _RANGE_SQL: str  # (key, first, last) -> the same, of the rows numbered first to last
    _PRUNE_SQL: str  # (key, seq): delete the key's history rows numbered below seq
    _PRUNE_PATHS_SQL: str  # (key, seq): delete the key's path rows numbered below seq
    _STRIP_SQL: str  # (key, first, below) -> seq, state (as text) of the key's rows numbered first to below - 1
    _REWRITE_SQL: str  # (state, key, seq): replace the document of a history row
    _FORGET_SQL: str  # (key): delete the key's history
    _conn: _SqlConnection
    _mutex: threading.Lock
    _at: dict[str, _Appending]
    keep: HistoryKeep = None

    @contextmanager
    def _atomic(self) -> Iterator[None]:
        """The statements run inside as one transaction."""
        raise NotImplementedError  # pragma: no cover

    def load(self, key: str) -> RunRecord | None:
        def read() -> tuple[Any, ...] | None:
            with self._mutex:
                row = self._conn.execute(self._LOAD_SQL, (key,)).fetchone()
            return None if row is None else tuple(row)

        return _settled(read, lambda key, row: self._whole(read_row(key, *row)), key)

    def _whole(self, record: RunRecord) -> RunRecord:
        """``record`` with its checkpoint whole: a head's path rebuilt from the history rows it names."""
        if record.problem is not None or not is_head(record.state):
            return record
        try:
            first, last = head_rows(record.state)
        except Damaged:
            return _rebuilt(record.key, record, [])
        with self._mutex:
            rows = self._conn.execute(self._RANGE_SQL, (record.key, first, last)).fetchall()
        history = [
            (seq, read_row(record.key, status, reason, updated, state)) for seq, status, reason, updated, state in rows
        ]
        return _rebuilt(record.key, record, history)

    def save(self, key: str, status: str, stop_reason: str, state: dict[str, Any]) -> None:
        doc = dumps(state)
        with self._mutex:
            self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, time.time(), doc))

    def append(self, key: str, status: str, stop_reason: str, state: dict[str, Any], kept: Kept | None) -> None:
        now, keep = time.time(), self.keep
        with self._mutex:
            at = None if kept is None else self._at.get(key)
            if at is not None and not whole_at(at.next, keep):  # the lease holder's next row, known without asking
                seq = at.next
                row, head, _, _ = _rows_for(state, kept, seq, keep, at)
                self._save_and_append(key, status, stop_reason, now, dumps(head), seq, dumps(row))
                at.next = seq + 1
                return
            with self._atomic():
                seq = int(self._conn.execute(self._NEXT_SQL, (key,)).fetchone()[0]) if at is None else at.next
                row, head, first, whole = _rows_for(state, kept, seq, keep, at)
                if whole:  # the path rows of earlier attempts are no longer read
                    self._conn.execute(self._PRUNE_PATHS_SQL, (key, seq))
                self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, now, dumps(head)))
                self._conn.execute(self._APPEND_SQL, (key, seq, status, stop_reason, now, dumps(row)))
                if whole_at(seq, keep):
                    self._prune(key, seq, first)
            self._at[key] = _Appending(first, seq + 1)

    def _prune(self, key: str, seq: int, first: int) -> None:
        """Row ``seq`` starts a block of a bounded history: the rows below the kept ones go, but those of this
        attempt (from ``first``) become path rows, which the attempt's later rows are rebuilt from (the caller holds
        the mutex, in a transaction)."""
        assert self.keep is not None
        below = pruned_below(seq, self.keep)
        self._conn.execute(self._PRUNE_SQL, (key, min(below, first)))
        since = max(first, below - self.keep)  # the rows below ``since`` left the kept ones at an earlier block
        for number, text in self._conn.execute(self._STRIP_SQL, (key, since, below)).fetchall():
            if isinstance(text, str) and not text.startswith(_PATH_ROW):
                self._conn.execute(self._REWRITE_SQL, (_stripped_text(text), key, number))

    def _save_and_append(
        self, key: str, status: str, stop_reason: str, now: float, head: str, seq: int, row: str
    ) -> None:
        """Save ``head`` as the latest checkpoint of ``key`` and append ``row`` as its history row ``seq``,
        atomically (the caller holds the mutex)."""
        with self._atomic():
            self._conn.execute(self._SAVE_SQL, (key, status, stop_reason, now, head))
            self._conn.execute(self._APPEND_SQL, (key, seq, status, stop_reason, now, row))

    def history(self, key: str) -> list[tuple[int, RunRecord]]:
        with self._mutex:
            rows = self._conn.execute(self._HISTORY_SQL, (key,)).fetchall()
        return [(seq, read_row(key, status, reason, updated, state)) for seq, status, reason, updated, state in rows]

    def runs(self, *, whole: bool = True) -> list[RunRecord]:
        with self._mutex:
            rows = self._conn.execute(self._RUNS_SQL).fetchall()
        records = [read_row(*row) for row in rows]
        return [self._whole(record) for record in records] if whole else records

    def delete(self, key: str) -> None:
        """Delete the run of ``key``: its latest checkpoint and its history."""
        with self._mutex, self._atomic():
            self._conn.execute(self._DELETE_SQL, (key,))
            self._conn.execute(self._FORGET_SQL, (key,))
            self._at.pop(key, None)


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
    _HISTORY_SQL = "SELECT seq, status, stop_reason, updated, state FROM plan_history WHERE key = ? ORDER BY seq"
    _RANGE_SQL = (
        "SELECT seq, status, stop_reason, updated, state FROM plan_history WHERE key = ? AND seq BETWEEN ? AND ? "
        "ORDER BY seq"
    )
    _PRUNE_SQL = "DELETE FROM plan_history WHERE key = ? AND seq < ?"
    # a path row's text starts with its marker (routegate writes it first); a damaged row never breaks the delete
    _PRUNE_PATHS_SQL = "DELETE FROM plan_history WHERE key = ? AND seq < ? AND substr(state, 1, 9) = '{\"~path\":'"
    _STRIP_SQL = "SELECT seq, state FROM plan_history WHERE key = ? AND seq >= ? AND seq < ? ORDER BY seq"
    _REWRITE_SQL = "UPDATE plan_history SET state = ? WHERE key = ? AND seq = ?"
    _FORGET_SQL = "DELETE FROM plan_history WHERE key = ?"

    def __init__(self, path: str, keep: HistoryKeep = None) -> None:
        self.path = path
        self.keep = keep
        self._at = {}
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
