"""Conversation memory: the last 10 messages of each session, kept in PostgreSQL (survives restarts).

The spec's rule is "Last 10 messages only, passed unchanged through all nodes": :meth:`MessageStore.append`
writes a message and deletes everything older than the session's last ``limit`` messages in the same
statement, so the table itself never holds more than ``limit`` messages per session. A turn's two messages are
written by one statement: a process that dies mid-turn leaves the turn wholly written or not at all.

A turn reads the history, runs, and writes its messages while it holds its session (:meth:`MessageStore.hold`,
a PostgreSQL advisory lock: :mod:`.advisory`), so the turns of one session run one at a time whichever processes
run them, and each reads what the one before it wrote. The holding is an object (:class:`SessionHold`) the turn
reads and writes through: what it holds travels with it, in no variable of the task's context.

**The history read with the lock's take.** The statement that takes the session's lock reads the session's history
too, for the sessions it grants (:class:`~routegate.apps.support.advisory.LockRead`: ``<schema>.support_history``,
:data:`~routegate.apps.support.db.HISTORY_FUNCTION`, the rows :meth:`MessageStore.recent` reads as one JSON array,
VOLATILE so that it reads after the lock was granted): the turn's history costs no exchange of its own. It is the
history kept for the tenure the take began (below). The read never waits on the locks' connection: when another
session holds the table exclusively it reads nothing, and :meth:`MessageStore.recent` reads on the pool as before.

**The history kept while the lock is.** Every write of a session's messages holds the session's lock (the desk's
turns and its reset; a write without it is a misuse, and drops what is kept). So while this process holds the lock
without a break (one :class:`~routegate.apps.support.advisory.Tenure`: turns queued in the process, or a follow-up
that comes while the previous turn's release still waits for its statement), no other process can have changed
the session's messages: the holder keeps the history it read and what it wrote through its :class:`SessionHold`
(the write returns the rows' timestamps and contexts as stored), and the next holder of the same tenure reads it
from memory instead of the database. It is kept against the tenure, weakly: when the lock is let go it is gone, and the next turn reads the
database again. So too when the locks' connection was lost (PostgreSQL let go of the lock with it): the next
holder takes the lock again, in a new tenure. At most one history per lock held, so at most ``max_held`` of them (``ROUTEGATE_DB_MAX_ADVISORY_LOCKS``).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    from psycopg import sql
    from psycopg.types.json import Jsonb

from routegate.apps.support.advisory import LockRead, Tenure, lock_key
from routegate.apps.support.contracts import Message, Role
from routegate.apps.support.db import HISTORY_FUNCTION, HISTORY_QUERY, SupportDatabase
from routegate.apps.support.inputs import check_session_id
from routegate.apps.support.tenancy import ANONYMOUS
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
        # the history last read or written under a tenure of the session's lock: gone with the tenure
        self._kept: weakref.WeakKeyDictionary[Tenure, tuple[Message, ...]] = weakref.WeakKeyDictionary()
        self._held: dict[str, Tenure] = {}  # session -> the tenure its holder in this process runs in
        # the history read that comes with the session lock's take (on the locks' connection: schema named)
        self._read = LockRead(
            "{function}({arg}, {limit})",
            function=sql.Identifier(db.schema, HISTORY_FUNCTION),
            limit=sql.Literal(limit),
        )
        self._recent = HISTORY_QUERY.format(table="support_messages", session="%s", limit="%s")

    @asynccontextmanager
    async def hold(self, session_id: str, *, within: float, tenant: str = ANONYMOUS) -> AsyncIterator[SessionHold]:
        """``async with store.hold(session_id, within=s, tenant=t) as session:`` — no other turn of the session, in
        this process or another on the same database, runs meanwhile. Waits at most ``within`` seconds, then raises
        :class:`~routegate.apps.support.advisory.LockTimeoutError`. Inside, ``session`` (:class:`SessionHold`) reads
        and writes the session's messages as its holder, for ``tenant``: its :meth:`SessionHold.recent` may answer
        from the history kept while the lock was held without a break, or read with the lock's take (see the
        module's description)."""
        name = session_lock_name(self._db.schema, check_session_id(session_id))
        async with self._db.locks.hold(name, within=within, read=self._read, read_arg=session_id) as tenure:
            read = tenure.read_by(self._read)
            # read in the statement that began the tenure, under the lock: nobody wrote since (none: the table was
            # locked by another session, or the tenure is older; :meth:`recent` reads the pool, or what is kept)
            if read is not None:
                self._kept[tenure] = tuple(
                    Message(role=role, content=content, created_at=float(at), context=context)
                    for role, content, at, context in read
                )
            self._held[session_id] = tenure
            try:
                yield SessionHold(self, session_id, tenure, tenant)
            finally:
                if self._held.get(session_id) is tenure:
                    del self._held[session_id]

    def _forget(self, session_id: str) -> None:
        """A write by a caller that does not hold the session (a misuse): its holder's kept history is not kept."""
        tenure = self._held.get(session_id)
        if tenure is not None:
            self._kept.pop(tenure, None)

    async def append(self, session_id: str, role: Role, content: str, *, tenant: str = ANONYMOUS) -> None:
        await self.extend(session_id, [(role, content)], tenant=tenant)

    async def extend(
        self,
        session_id: str,
        messages: list[tuple[Role, str]],
        *,
        context: Mapping[str, Any] | None = None,
        tenant: str = ANONYMOUS,
    ) -> None:
        """Append messages in order and keep only the last ``limit`` of the session (one statement), as a caller
        that does not hold the session (a holder writes through its :class:`SessionHold`). ``context`` (JSON), if
        given, is stored with the last message: what the turn established (:mod:`.followup`)."""
        await self._extend(session_id, messages, context, None, tenant)

    async def recent(self, session_id: str, *, tenant: str = ANONYMOUS) -> list[Message]:
        """The session's last ``limit`` messages, oldest first (empty for an unknown session), from the database."""
        return await self._recent_of(session_id, None, tenant)

    async def clear(self, session_id: str, *, tenant: str = ANONYMOUS) -> None:
        """Forget the session's messages, as a caller that does not hold the session."""
        await self._clear(session_id, None, tenant)

    async def _extend(
        self,
        session_id: str,
        messages: list[tuple[Role, str]],
        context: Mapping[str, Any] | None,
        tenure: Tenure | None,
        tenant: str,
    ) -> None:
        check_session_id(session_id)
        for role, content in messages:
            if role not in ("user", "assistant"):
                raise ConfigurationError(f"role must be 'user' or 'assistant', got {role!r}")
            if len(content) > self.max_chars:
                raise ConfigurationError(f"a message has {len(content)} characters, over {self.max_chars}")
        if not messages:
            return
        # what is kept is stale from here until the write is known to have committed (it may fail, or be cancelled)
        before = None if tenure is None else self._kept.pop(tenure, None)
        if tenure is None:
            self._forget(session_id)
        # only the last ``limit`` can survive the trim; one statement, one round trip (autocommit): the DELETE
        # cannot see the rows the INSERT adds (one snapshot), so the ids to keep are taken from both
        kept = messages[-self.limit :]
        rows = ", ".join(["(%s, %s, %s, %s)"] * len(kept))
        contexts = [None] * (len(kept) - 1) + [Jsonb(dict(context)) if context is not None else None]
        params: list[object] = [
            v for (role, content), extra in zip(kept, contexts, strict=True) for v in (session_id, role, content, extra)
        ]
        async with self._db.connection(tenant) as conn:
            cur = await conn.execute(
                "WITH added AS (INSERT INTO support_messages (session_id, role, content, context)"
                f" VALUES {rows} RETURNING id, created_at, context),"
                " trimmed AS (DELETE FROM support_messages WHERE session_id = %s AND id < ("
                " SELECT min(id) FROM (SELECT id FROM ("
                " SELECT id FROM support_messages WHERE session_id = %s UNION ALL SELECT id FROM added) AS every_id"
                " ORDER BY id DESC LIMIT %s) AS keep))"
                " SELECT extract(epoch FROM created_at)::float8 AS at, context FROM added ORDER BY id",
                [*params, session_id, session_id, self.limit],
            )
            stored = await cur.fetchall()
        if tenure is None:
            self._forget(session_id)  # again: a holder may have read while this write ran
        elif before is not None:  # the history was known before: it is known after
            added = tuple(
                Message(role=role, content=content, created_at=float(row["at"]), context=row["context"])
                for (role, content), row in zip(kept, stored, strict=True)
            )
            self._kept[tenure] = (*before, *added)[-self.limit :]

    async def _recent_of(self, session_id: str, tenure: Tenure | None, tenant: str) -> list[Message]:
        check_session_id(session_id)
        if tenure is not None:
            kept = self._kept.get(tenure)
            if kept is not None:
                return list(kept)
        async with self._db.connection(tenant) as conn:
            cur = await conn.execute(self._recent, (session_id, self.limit))
            rows = await cur.fetchall()
        history = [
            Message(role=r["role"], content=r["content"], created_at=float(r["at"]), context=r["context"]) for r in rows
        ]
        if tenure is not None:
            self._kept[tenure] = tuple(history)
        return history

    async def _clear(self, session_id: str, tenure: Tenure | None, tenant: str) -> None:
        check_session_id(session_id)
        if tenure is None:
            self._forget(session_id)
        else:
            self._kept.pop(tenure, None)
        async with self._db.connection(tenant) as conn:
            await conn.execute("DELETE FROM support_messages WHERE session_id = %s", (session_id,))
        if tenure is None:
            self._forget(session_id)
        else:
            self._kept[tenure] = ()


class SessionHold:
    """A session held (:meth:`MessageStore.hold`): its messages read and written as its holder, for its tenant. The
    history read or written here is kept against the lock's tenure, so the next holder of the same unbroken
    holding reads it from memory."""

    __slots__ = ("_store", "_tenure", "session_id", "tenant")

    def __init__(self, store: MessageStore, session_id: str, tenure: Tenure, tenant: str) -> None:
        self._store = store
        self._tenure = tenure
        self.session_id = session_id
        self.tenant = tenant

    async def recent(self) -> list[Message]:
        """The session's last messages, oldest first: kept under the tenure, read with the lock's take, or read."""
        return await self._store._recent_of(self.session_id, self._tenure, self.tenant)

    async def extend(self, messages: list[tuple[Role, str]], *, context: Mapping[str, Any] | None = None) -> None:
        """:meth:`MessageStore.extend`, as the session's holder: what it wrote is kept under the tenure."""
        await self._store._extend(self.session_id, messages, context, self._tenure, self.tenant)

    async def clear(self) -> None:
        """Forget the session's messages, as its holder."""
        await self._store._clear(self.session_id, self._tenure, self.tenant)
