"""Who holds an advisory lock, seen from outside (``pg_locks``); a holder's backend terminated as a database
restart or an administrator would end it; and a link to the database that the test cuts as a network would."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

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


class CuttableLink:
    """A Unix-socket relay in front of the embedded PostgreSQL: connect to :attr:`url` instead of the server's, and
    :meth:`cut` every connection made through it at once, with no word from the server (as a network cut or a
    crashed host would: the client sees the end of the stream, the backend its client gone)."""

    def __init__(self, url: str) -> None:
        params = conninfo_to_dict(url)
        self._target = os.path.join(str(params["host"]), f".s.PGSQL.{params.get('port') or 5432}")
        self._dir = tempfile.mkdtemp(prefix="rg-link-")  # short: a socket path has at most 107 bytes
        self.url = make_conninfo(url, host=self._dir)
        self._links: list[asyncio.StreamWriter] = []

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[CuttableLink]:
        listening = os.path.join(self._dir, os.path.basename(self._target))
        server = await asyncio.start_unix_server(self._relay, path=listening)
        try:
            yield self
        finally:
            self.cut()
            server.close()
            await server.wait_closed()
            with contextlib.suppress(OSError):
                os.unlink(listening)
            os.rmdir(self._dir)

    def cut(self) -> None:
        for writer in self._links:
            writer.transport.abort()
        self._links.clear()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_unix_connection(self._target)
        self._links += [client_writer, server_writer]
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
