"""Conversation memory: the last 10 messages of each session, kept in PostgreSQL (survives restarts).

The spec's rule is "Last 10 messages only, passed unchanged through all nodes": :meth:`MessageStore.append`
writes a message and deletes everything older than the session's last ``limit`` messages in the same
statement, so the table itself never holds more than ``limit`` messages per session. A turn's two messages are
written by one statement: a process that dies mid-turn leaves the turn wholly written or not at all.

A turn reads the history, runs, and writes its messages while it holds its session (:meth:`MessageStore.hold`,
a PostgreSQL advisory lock: :mod:`.advisory`), so the turns of one session run one at a time whichever processes
run them, and each reads what the one before it wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    from psycopg.types.json import Jsonb

from routegate.apps.support.advisory import lock_key
from routegate.apps.support.contracts import Message, Role
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.inputs import check_session_id
from routegate.errors import ConfigurationError

MEMORY_LIMIT: Final = 10
MAX_STORED_CHARS: Final = 32_000
"""The default bound on one stored message (user or assistant); the desk raises it with its message limit."""


def session_lock_name(schema: str, session_id: str) -> str:
    """The advisory lock's name of a session's turns (its key: :func:`session_lock_key`)."""
    return f"routegate.support:{schema}:{session_id}"


def session_lock_key(schema: str, session_id: str) -> int:
    """The ``pg_advisory_lock`` key a turn of ``session_id`` (in the desk's ``schema``) holds while it runs."""
    return lock_key(session_lock_name(schema, session_id))


class MessageStore:
    """Per-session message history in the ``support_messages`` table."""

    def __init__(self, db: SupportDatabase, *, limit: int = MEMORY_LIMIT, max_chars: int = MAX_STORED_CHARS) -> None:
        if limit < 1:
            raise ConfigurationError(f"memory limit must be >= 1, got {limit}")
        self._db = db
        self.limit = limit
        self.max_chars = max_chars

    def hold(self, session_id: str, *, within: float) -> AbstractAsyncContextManager[None]:
        """``async with store.hold(session_id, within=s):`` — no other turn of the session, in this process or
        another on the same database, runs meanwhile. Waits at most ``within`` seconds, then raises
        :class:`~routegate.apps.support.advisory.LockTimeoutError`."""
        name = session_lock_name(self._db.schema, check_session_id(session_id))
        return self._db.locks.hold(name, within=within)

    async def append(self, session_id: str, role: Role, content: str) -> None:
        await self.extend(session_id, [(role, content)])

    async def extend(
        self, session_id: str, messages: list[tuple[Role, str]], *, context: Mapping[str, Any] | None = None
    ) -> None:
        """Append messages in order and keep only the last ``limit`` of the session (one statement). ``context``
        (JSON), if given, is stored with the last message: what the turn established (:mod:`.followup`)."""
        check_session_id(session_id)
        for role, content in messages:
            if role not in ("user", "assistant"):
                raise ConfigurationError(f"role must be 'user' or 'assistant', got {role!r}")
            if len(content) > self.max_chars:
                raise ConfigurationError(f"a message has {len(content)} characters, over {self.max_chars}")
        if not messages:
            return
        # only the last ``limit`` can survive the trim; one statement, one round trip (autocommit): the DELETE
        # cannot see the rows the INSERT adds (one snapshot), so the ids to keep are taken from both
        kept = messages[-self.limit :]
        rows = ", ".join(["(%s, %s, %s, %s)"] * len(kept))
        contexts = [None] * (len(kept) - 1) + [Jsonb(dict(context)) if context is not None else None]
        params: list[object] = [
            v for (role, content), extra in zip(kept, contexts, strict=True) for v in (session_id, role, content, extra)
        ]
        async with self._db.connection() as conn:
            await conn.execute(
                f"WITH added AS (INSERT INTO support_messages (session_id, role, content, context) VALUES {rows} RETURNING id)"
                " DELETE FROM support_messages WHERE session_id = %s AND id < ("
                " SELECT min(id) FROM (SELECT id FROM ("
                " SELECT id FROM support_messages WHERE session_id = %s UNION ALL SELECT id FROM added) AS every_id"
                " ORDER BY id DESC LIMIT %s) AS keep)",
                [*params, session_id, session_id, self.limit],
            )

    async def recent(self, session_id: str) -> list[Message]:
        """The session's last ``limit`` messages, oldest first (empty for an unknown session)."""
        check_session_id(session_id)
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT role, content, extract(epoch FROM created_at)::float8 AS at, context FROM ("
                " SELECT id, role, content, created_at, context FROM support_messages WHERE session_id = %s"
                " ORDER BY id DESC LIMIT %s) AS last ORDER BY id",
                (session_id, self.limit),
            )
            rows = await cur.fetchall()
        return [
            Message(role=r["role"], content=r["content"], created_at=float(r["at"]), context=r["context"]) for r in rows
        ]

    async def clear(self, session_id: str) -> None:
        check_session_id(session_id)
        async with self._db.connection() as conn:
            await conn.execute("DELETE FROM support_messages WHERE session_id = %s", (session_id,))
