"""Who holds an advisory lock, seen from outside (``pg_locks``), and a holder's backend terminated as a database
restart or an administrator would end it."""

from __future__ import annotations

from typing import Any

import psycopg

TERMINATE_WAIT_MS = 30_000


def holder_pids(conn: psycopg.Connection[Any], key: int) -> list[int]:
    """The backends that hold the advisory lock ``key`` (pg_locks splits a bigint key into classid/objid)."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    rows = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND classid::bigint = %s AND objid::bigint = %s ORDER BY pid",
        (unsigned >> 32, unsigned & 0xFFFF_FFFF),
    ).fetchall()
    return [int(pid) for (pid,) in rows]


def terminate_holder(conn: psycopg.Connection[Any], key: int) -> int:
    """Terminates the one backend that holds ``key`` and returns its pid once it is gone: ``pg_terminate_backend``
    with a timeout waits (bounded, server side) until the process has ended, its locks let go, its ``FATAL`` sent
    to its client; then it is in neither ``pg_locks`` nor ``pg_stat_activity``."""
    (pid,) = holder_pids(conn, key)
    row = conn.execute("SELECT pg_terminate_backend(%s, %s)", (pid, TERMINATE_WAIT_MS)).fetchone()
    assert row is not None and row[0] is True, f"backend {pid} still runs after {TERMINATE_WAIT_MS} ms"
    assert holder_pids(conn, key) == []
    gone = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    assert gone is not None and gone[0] == 0
    return pid


def terminate_holder_at(url: str, key: int) -> int:
    """:func:`terminate_holder`, from a connection of its own to ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        return terminate_holder(conn, key)
