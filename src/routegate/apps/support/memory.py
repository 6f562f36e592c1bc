"""Conversation memory: the last 10 messages of each session, kept in PostgreSQL (survives restarts).

The spec's rule is "Last 10 messages only, passed unchanged through all nodes": :meth:`MessageStore.append`
writes a message and deletes everything older than the session's last ``limit`` messages in the same
transaction, so the table itself never holds more than ``limit`` messages per session.
"""

from __future__ import annotations

import re
from typing import Final

from routegate.apps.support.contracts import Message, Role
from routegate.apps.support.db import SupportDatabase
from routegate.errors import ConfigurationError

MEMORY_LIMIT: Final = 10
MAX_MESSAGE_CHARS: Final = 32_000
_SESSION_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")


def check_session_id(session_id: object) -> str:
    """Session ids are 1-128 characters of letters, digits and ``._:@-``."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise ConfigurationError(
            f"session_id must be 1-128 characters of letters, digits and ._:@- ; got {str(session_id)[:60]!r}"
        )
    return session_id


class MessageStore:
    """Per-session message history in the ``support_messages`` table."""

    def __init__(self, db: SupportDatabase, *, limit: int = MEMORY_LIMIT) -> None:
        if limit < 1:
            raise ConfigurationError(f"memory limit must be >= 1, got {limit}")
        self._db = db
        self.limit = limit

    async def append(self, session_id: str, role: Role, content: str) -> None:
        await self.extend(session_id, [(role, content)])

    async def extend(self, session_id: str, messages: list[tuple[Role, str]]) -> None:
        """Append messages in order and keep only the last ``limit`` of the session (one transaction)."""
        check_session_id(session_id)
        for role, content in messages:
            if role not in ("user", "assistant"):
                raise ConfigurationError(f"role must be 'user' or 'assistant', got {role!r}")
            if len(content) > MAX_MESSAGE_CHARS:
                raise ConfigurationError(f"a message has {len(content)} characters, over {MAX_MESSAGE_CHARS}")
        async with self._db.connection() as conn, conn.transaction():
            # A chat turn need not wait for the WAL flush: a crash may lose the last turn, never corrupt the
            # table (PostgreSQL's asynchronous commit). It halves the memory write on a busy disk.
            await conn.execute("SET LOCAL synchronous_commit TO OFF")
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO support_messages (session_id, role, content) VALUES (%s, %s, %s)",
                    [(session_id, role, content) for role, content in messages],
                )
            await conn.execute(
                "DELETE FROM support_messages WHERE session_id = %(s)s AND id < ("
                " SELECT min(id) FROM (SELECT id FROM support_messages WHERE session_id = %(s)s"
                " ORDER BY id DESC LIMIT %(n)s) AS keep)",
                {"s": session_id, "n": self.limit},
            )

    async def recent(self, session_id: str) -> list[Message]:
        """The session's last ``limit`` messages, oldest first (empty for an unknown session)."""
        check_session_id(session_id)
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT role, content, extract(epoch FROM created_at)::float8 AS at FROM ("
                " SELECT id, role, content, created_at FROM support_messages WHERE session_id = %s"
                " ORDER BY id DESC LIMIT %s) AS last ORDER BY id",
                (session_id, self.limit),
            )
            rows = await cur.fetchall()
        return [Message(role=r["role"], content=r["content"], created_at=float(r["at"])) for r in rows]

    async def clear(self, session_id: str) -> None:
        check_session_id(session_id)
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM support_messages WHERE session_id = %s", (session_id,))
