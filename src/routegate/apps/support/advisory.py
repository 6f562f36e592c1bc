"""Named locks that hold across processes, on PostgreSQL advisory locks: the support desk runs one session's turns
one at a time whichever process runs them (``routegate serve`` workers, two servers over one database, Ray Serve
replicas), so a follow-up always reads the history its predecessor wrote.

How a lock is held (:meth:`AdvisoryLocks.hold`):

* **In the process first.** One :class:`asyncio.Lock` per name (first come, first served): only the first of a
  process's turns of a session talks to PostgreSQL; the others queue in memory, and the database lock passes from
  one to the next without a round trip. It is let go when the last of them leaves.
* **Then in PostgreSQL**, with ``pg_try_advisory_lock`` on a connection of this object's own, opened on first use
  outside the pool. Holding or waiting for a lock never takes one of the pool's connections: the pool stays for the
  turns' own queries, and turns that hold locks can never starve turns that need a connection (with a pool of
  four, four lock holders each waiting for a fifth connection would deadlock). The try never blocks that shared
  connection: while another process holds the lock, the waiter tries again after 2, 4, 8 … 50 ms.
* **One statement for many.** The takes and releases that wait while a statement runs go together in the next
  one (``unnest`` of the keys), and a release waits up to 5 ms for a take to go with, so a turn's two lock
  operations cost about one statement, shared with other turns under load.
* **A read with the take.** A take may carry a read (:class:`LockRead`: an expression and its argument): the
  statement that grants the lock evaluates it, for the names it grants and only those, and the holder finds the
  value on its :class:`Tenure` (:meth:`Tenure.read_by`). A name not granted reads nothing and tries again as any
  other. The desk reads a session's history so, with the take: one round trip less per turn.
* **Kept for a follow-up.** A take of a name whose release is still waiting for its statement cancels that
  release: the lock is never let go, and nothing is sent. Each unbroken holding is a :class:`Tenure` (what
  :meth:`AdvisoryLocks.hold` gives): the same object from the take PostgreSQL granted to the release it ran, a new
  one after, so data kept against a tenure (the desk's history, :mod:`.memory`) is data no other process can
  have changed meanwhile.
* **Only on a live connection.** A holding goes on without a statement (kept for a follow-up, or passed to the
  process's next holder) only when the connection shows no sign of loss, looked at without a round trip: nothing
  that came from the server meanwhile says it is going (a terminated backend's ``FATAL``, the end of the stream).
  While a statement is under way the look waits for its end. A connection found lost is dropped as below, and
  the holding becomes a take on a new connection, with a new tenure.
* **Bounded.** ``within`` seconds bound the wait for other holders (in the process and in PostgreSQL); then
  :class:`LockTimeoutError`. A caller that is cancelled while waiting leaves nothing held.
* **At most** ``max_held`` **locks at once.** Every lock the connection holds, tries or is letting go takes one of
  ``max_held`` places (a process-wide semaphore, per key), so one process never holds more than that many rows of
  PostgreSQL's shared lock table (``max_locks_per_transaction`` x ``max_connections``, 6,400 by default): a flood of
  new sessions cannot fill the table and make every other lock in the database fail. A name whose process holds
  ``max_held`` others waits for a place, within ``within`` (then :class:`LockCapacityError`, a
  :class:`LockTimeoutError`).
* **Let go in the background** when the last holder in the process leaves (a cancelled holder lets go too);
  :meth:`AdvisoryLocks.close` waits for the releases under way.
* **A process that dies lets go**: PostgreSQL ends its backend when the connection drops, and the backend's
  advisory locks go with it, so a killed worker or replica never blocks a session.
* **The connection lost** (the database restarted, the backend terminated, a network cut): its locks are gone
  with it. The holders of that moment finish their turns unprotected (the log says how many); the next take, the
  next holder in the process and a follow-up whose release was still waiting alike reconnect and take the lock
  again, in a new tenure: nothing kept against the lost one is used.

Keys are 64-bit (BLAKE2b of the name), in the bigint space of ``pg_advisory_lock`` shared by the whole database:
name them with a prefix of your own (the desk uses ``routegate.support:<schema>:<session id>``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, LiteralString

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import pq, sql

from routegate.errors import ConfigurationError, RuntimeFaultError

logger = logging.getLogger(__name__)

APPLICATION_NAME: Final = "routegate-advisory-locks"
"""How the locks' connection shows in ``pg_stat_activity``."""
FIRST_RETRY_SECONDS: Final = 0.002
LAST_RETRY_SECONDS: Final = 0.05
READ_LOCK_TIMEOUT_MS: Final = 50
"""``lock_timeout`` of the locks' connection: the longest a read that comes with a take (:class:`LockRead`) may
wait for a table or index lock (a plain read waits only for another session's ``ACCESS EXCLUSIVE``: ``LOCK TABLE``,
most of ``ALTER TABLE``, ``REINDEX``); then it fails with ``lock_not_available``, which a read meant never to wait
catches (the desk's does). Takes and releases never wait."""
RELEASE_LINGER_SECONDS: Final = 0.005
"""How long a release waits for a take to share its statement, or for a take of the same name to keep the lock
(another process sees the lock free that much later; its waiters retry every 2-50 ms anyway)."""
_NOT_HELD: Final = -1
_GOING: Final = frozenset({"FATAL", "PANIC"})  # the severities of a message that the server sends as it closes


def _busy(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether a statement is under way on ``conn`` (sent, its results not all read)."""
    return not conn.closed and conn.info.transaction_status == pq.TransactionStatus.ACTIVE


class LockTimeoutError(RuntimeFaultError):
    """A lock was not free within the time the caller allowed."""


class LockCapacityError(LockTimeoutError):
    """The process held its most locks at once (``max_held``) for all the time the caller allowed."""


def lock_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of ``name`` (BLAKE2b): what ``pg_advisory_lock(key)`` takes."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


class Tenure:
    """One unbroken holding of a named lock by this process: from the take PostgreSQL granted to the release that
    let it go (or the loss of the locks' connection). A holder that comes while the release still waits for its
    statement keeps the tenure (:meth:`AdvisoryLocks.hold`); every other take starts a new one. While a tenure
    lives, no other process has held the lock since it began: what its holders read and wrote under it is still
    what the database holds, if every writer of that data holds the lock. (A lost connection is the exception the
    module describes: its holders finish unprotected, and the next take starts a new tenure.) Compare by identity;
    keep data against it weakly: it is dropped once the lock is let go."""

    __slots__ = ("__weakref__", "_read", "name")

    def __init__(self, name: str, read: tuple[LockRead, Any] | None = None) -> None:
        self.name = name
        self._read = read

    def read_by(self, read: LockRead) -> Any:
        """The value ``read`` gave in the statement that began this tenure (its take's :class:`LockRead`), once:
        ``None`` when the take carried another read or none, for a tenure kept from an earlier take, after the first
        call, and when the read's value was ``NULL``."""
        if self._read is None or self._read[0] is not read:
            return None
        value, self._read = self._read[1], None
        return value

    def __repr__(self) -> str:
        return f"Tenure({self.name!r})"


class LockRead:
    """A read that a take of a lock runs in its own statement, once the lock is granted: ``expression`` is one SQL
    value for one name (a function's call, a scalar subquery; rows as a JSON array), in which ``{arg}`` stands for
    the text the holder gives (:meth:`AdvisoryLocks.hold`'s ``read_arg``) and the other ``{fields}`` for ``parts``
    (:mod:`psycopg.sql`: quoted identifiers, literals); no ``%`` in it. It is evaluated for the names the statement
    grants and for no other (a ``CASE`` on the grant). The locks' connection has no search path of the caller's:
    name tables and functions with their schema. Make one per kind of read (its statement is composed once): the
    takes that carry the same one share a statement.

    A read must not wait: the connection takes and lets go every lock of the process. A plain read waits only for a
    table that another session holds ``ACCESS EXCLUSIVE``, at most :data:`READ_LOCK_TIMEOUT_MS`; a statement that
    fails (that timeout uncaught, a missing table) fails its takes and drops the connection, and every lock it
    held with it. The desk's read takes its table's lock with ``NOWAIT`` and answers "not read" when it is not free.

    The statement's snapshot is taken before its takes run. A plain SELECT would not see what the lock's previous
    holder committed just before letting go (between the snapshot and the take); a read that must see it calls a
    VOLATILE function, whose queries take their snapshot when they run, after the take granted the lock."""

    __slots__ = ("statement",)

    def __init__(self, expression: LiteralString, **parts: sql.Composable) -> None:
        if "%" in expression:  # it goes into a statement with parameters: psycopg would fail every take with it
            raise ConfigurationError(
                f"a LockRead's expression may not contain '%' (got {expression!r}): pass values as parts, "
                "e.g. LockRead('f({value})', value=sql.Literal(...))"
            )
        try:
            read = sql.SQL(expression).format(arg=sql.SQL("o.arg"), **parts)
        except (KeyError, IndexError) as exc:
            raise ConfigurationError(
                f"a LockRead's expression {expression!r} names {{{exc.args[0]}}}, which is not among its parts "
                f"({', '.join(sorted(parts)) or 'none'}; {{arg}} is the holder's read_arg): pass it as a keyword"
            ) from None
        self.statement: sql.Composed = sql.SQL(_READ_STATEMENT).format(read=read)


@dataclass(slots=True)
class _Gate:
    """One name's lock in this process: its queue, how many hold or wait for it, and the connection generation
    its database lock was taken on (``_NOT_HELD``: none)."""

    name: str
    key: int
    queue: asyncio.Lock
    users: int = 0
    generation: int = _NOT_HELD
    pinned: bool = False  # holds one of the ``max_held`` places for its key
    tenure: Tenure | None = None  # the holding its database lock belongs to


@dataclass(slots=True)
class _Op:
    """One take (``pg_try_advisory_lock``) or release (``pg_advisory_unlock``) waiting for the next statement.
    A take's ``done`` gets the generation it was taken on, or ``_NOT_HELD``; a release's ``generation`` is the one
    its lock was taken on."""

    key: int
    take: bool
    generation: int = _NOT_HELD
    done: asyncio.Future[int] | None = None
    tenure: Tenure | None = None  # a release's: the holding it ends (a take of the same name may keep it)
    read: LockRead | None = None  # a take's read, run when it is granted, and the text it reads for
    arg: str | None = None
    value: Any = None  # what the read gave, set before ``done``'s result


_STATEMENT: Final = (
    "SELECT CASE WHEN o.take THEN pg_try_advisory_lock(o.key) ELSE pg_advisory_unlock(o.key) END"
    " FROM unnest(%s::int8[], %s::bool[]) WITH ORDINALITY AS o(key, take, n) ORDER BY o.n"
)
# the same, and ``{read}`` for each take granted that carries an argument: the takes and releases first (a
# MATERIALIZED CTE: each row's before its read), the read under a CASE on the grant (not evaluated for the others)
_READ_STATEMENT: Final = (
    "WITH o AS MATERIALIZED (SELECT o.n, o.arg,"
    " CASE WHEN o.take THEN pg_try_advisory_lock(o.key) ELSE pg_advisory_unlock(o.key) END AS done"
    " FROM unnest(%s::int8[], %s::bool[], %s::text[]) WITH ORDINALITY AS o(key, take, arg, n))"
    " SELECT o.done, CASE WHEN o.done AND o.arg IS NOT NULL THEN {read} END FROM o ORDER BY o.n"
)


class AdvisoryLocks:
    """Cross-process named locks on one PostgreSQL database (``url``); see the module's description.

    Open nothing up front: the connection is made by the first :meth:`hold`. :meth:`close` it when done
    (:class:`~routegate.apps.support.db.SupportDatabase` closes its own with the pool)."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0, max_held: int = 256) -> None:
        if max_held < 1:
            raise ConfigurationError(f"max_held (the most advisory locks held at once) must be >= 1, got {max_held}")
        self.max_held = max_held
        self._places = asyncio.Semaphore(max_held)
        self._pins: dict[int, int] = {}  # key -> the gate and the statements that may hold its lock
        self._url = url
        self._connect_timeout = connect_timeout
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._connecting = asyncio.Lock()
        self._generation = 0  # +1 whenever the connection is dropped: the locks taken on it are gone
        self._gates: dict[str, _Gate] = {}
        self._queue: list[_Op] = []  # takes and releases for the next statement
        self._sender: asyncio.Task[None] | None = None
        self._linger: asyncio.TimerHandle | None = None  # releases waiting for a take to go with
        # the read of the last statement that had one: the statements without a read of their own use its text (a
        # release reads nothing in it), so that the connection runs one statement, prepared once
        self._last_read: LockRead | None = None
        # holdings that go on without a statement, waiting for the statement under way to end to learn whether the
        # connection is alive (the sender looks between its statements: :meth:`_judge`)
        self._verdicts: list[asyncio.Future[None]] = []
        self._going = _NOT_HELD  # the generation whose server said it is closing the connection (a FATAL)
        self._closed = False

    def __len__(self) -> int:
        """How many names are held or waited for in this process."""
        return len(self._gates)

    @asynccontextmanager
    async def hold(
        self, name: str, *, within: float, read: LockRead | None = None, read_arg: str = ""
    ) -> AsyncIterator[Tenure]:
        """``async with locks.hold(name, within=s) as tenure:`` — the block runs while no other holder of ``name``,
        in this process or another, runs; ``tenure`` is the unbroken holding it runs in (:class:`Tenure`). Waits at
        most ``within`` seconds (:class:`LockTimeoutError`); a database fault while taking the lock propagates
        (``psycopg.OperationalError``). With ``read``, the statement that takes the lock reads ``read`` for
        ``read_arg`` (:class:`LockRead`): its value is ``tenure.read_by(read)`` when this hold began the tenure."""
        gate = self._gates.get(name)
        if gate is None:
            gate = self._gates[name] = _Gate(name, lock_key(name), asyncio.Lock())
        gate.users += 1
        try:
            await self._enter(gate, name, within, read, read_arg)
            try:
                assert gate.tenure is not None  # set by the take (or kept) in _enter
                yield gate.tenure
            finally:
                gate.queue.release()
        finally:
            gate.users -= 1
            if gate.users == 0:
                del self._gates[name]
                if gate.generation != _NOT_HELD:
                    # let go in the background: the caller is done, and a cancelled caller must still let go.
                    # A later holder of the name in this process is not hurt by a release still under way: its
                    # own take counts once more on the same connection (advisory locks count their takes).
                    self._submit(_Op(gate.key, take=False, generation=gate.generation, tenure=gate.tenure))
                if gate.pinned:  # the release (if any) keeps the key's place until it has run
                    self._unpin(gate.key)

    async def close(self) -> None:
        """Close the connection (every lock it holds goes with it) after the releases still under way."""
        self._closed = True
        self._start()
        while self._sender is not None:
            await asyncio.wait([self._sender])
        await self._drop(self._conn)

    # -- taking ---------------------------------------------------------------------------------------------
    async def _enter(self, gate: _Gate, name: str, within: float, read: LockRead | None, arg: str) -> None:
        """Take the gate's queue, then the database lock. ``within`` bounds the waits for other holders (the
        queue behind this process's own, the retries while another process holds it), not the first try's
        round trip: with nobody else there, a lock is taken whatever the bound."""
        loop = asyncio.get_running_loop()
        deadline = None if math.isinf(within) else loop.time() + within
        placed = True
        try:
            if gate.users > 1:  # another turn of the name in this process holds or waits
                async with asyncio.timeout_at(deadline):
                    await gate.queue.acquire()
            else:
                await gate.queue.acquire()  # free: does not wait
            try:
                if gate.generation != self._generation:
                    placed = False
                    async with asyncio.timeout_at(deadline):
                        await self._place(gate)
                    placed = True
                    self._keep(gate)
                if gate.generation == self._generation:  # held on (passed on in the process, or kept): if it lives
                    await self._confirm()
                if gate.generation != self._generation and not await self._try(gate, read, arg):
                    async with asyncio.timeout_at(deadline):
                        await self._retry(gate, read, arg)
            except BaseException:
                gate.queue.release()
                raise
        except TimeoutError:
            if deadline is None or loop.time() < deadline:
                raise
            if not placed:
                raise LockCapacityError(
                    f"lock {name!r} found no place within {within:.3g} s: this process already holds or tries "
                    f"max_held={self.max_held} advisory locks (ROUTEGATE_DB_MAX_ADVISORY_LOCKS)"
                ) from None
            raise LockTimeoutError(
                f"lock {name!r} was not free within {within:.3g} s (another holder still runs)"
            ) from None

    # -- the places: at most ``max_held`` keys held, tried or being let go ---------------------------------------
    async def _place(self, gate: _Gate) -> None:
        """Give ``gate`` a place for its key (waiting while ``max_held`` other keys have one)."""
        if gate.pinned:
            return
        if gate.key not in self._pins:
            await self._places.acquire()
            if gate.key in self._pins:  # the same key placed meanwhile (another name, same hash): one place
                self._places.release()
        self._pins[gate.key] = self._pins.get(gate.key, 0) + 1
        gate.pinned = True

    def _pin(self, key: int) -> None:
        """One more user of ``key``'s place; the key has one already (its gate's, or the statement's it replaces)."""
        self._pins[key] += 1

    def _unpin(self, key: int) -> None:
        left = self._pins[key] - 1
        if left:
            self._pins[key] = left
        else:
            del self._pins[key]
            self._places.release()

    def _keep(self, gate: _Gate) -> None:
        """Take over the gate's lock from its release still waiting for its statement (the lock was not let go by
        this process): the release is dropped, and the gate holds on with the release's generation and tenure, if
        the connection lives (:meth:`_confirm`, next)."""
        for i, op in enumerate(self._queue):
            if (
                not op.take
                and op.key == gate.key
                and op.generation == self._generation
                and op.tenure is not None
                and op.tenure.name == gate.name
            ):
                del self._queue[i]
                self._unpin(op.key)  # the release's place; the gate has its own
                gate.generation, gate.tenure = op.generation, op.tenure
                return

    async def _confirm(self) -> None:
        """Before a holding goes on without a statement: drop the connection if it is lost (the holding's
        generation is then past, and the caller takes the lock again). While a statement is under way on it, the
        sender looks once it has ended (:meth:`_judge`)."""
        conn = self._conn
        if conn is not None and self._sender is not None and _busy(conn):
            verdict: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._verdicts.append(verdict)
            await verdict
        elif not self._alive(conn):
            await self._drop(conn)

    def _alive(self, conn: psycopg.AsyncConnection[Any] | None) -> bool:
        """Whether the idle connection ``conn`` shows no sign of loss, without a round trip: what the server sent
        since the last statement is read (libpq's ``PQconsumeInput``, which never waits) and parsed; a backend
        that is closing the connection (terminated, the server shutting down) sends a ``FATAL`` first, and its end
        of the stream closes the connection. Anything else it may send while idle is harmless."""
        if conn is None or conn.closed:
            return False
        try:
            conn.pgconn.consume_input()
        except psycopg.OperationalError:  # the end of the stream: closed
            return False
        conn.pgconn.is_busy()  # parses what came: a FATAL reaches _heard
        return not conn.closed and self._going != self._generation

    def _heard(self, generation: int, diagnostic: psycopg.errors.Diagnostic) -> None:
        """A notice of the connection of ``generation``: a message the server sent while no statement ran (it
        reaches the notice handlers) with a ``FATAL`` severity says the connection is closing."""
        if diagnostic.severity_nonlocalized in _GOING:
            self._going = generation

    async def _retry(self, gate: _Gate, read: LockRead | None, arg: str) -> None:
        delay = FIRST_RETRY_SECONDS
        while True:
            await asyncio.sleep(delay)
            if await self._try(gate, read, arg):
                return
            delay = min(delay * 2, LAST_RETRY_SECONDS)

    async def _try(self, gate: _Gate, read: LockRead | None, arg: str) -> bool:
        """One ``pg_try_advisory_lock`` (in the next statement, with ``read`` for ``arg`` if granted);
        ``gate.generation`` records the connection it was taken on, ``gate.tenure`` what was read."""
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        op = _Op(gate.key, take=True, done=done, read=read, arg=None if read is None else arg)
        self._submit(op)
        try:
            generation = await done
        except asyncio.CancelledError:
            # granted before the caller was cancelled (a future cancelled still waiting is seen to by the sender)
            if done.done() and not done.cancelled() and done.exception() is None and done.result() != _NOT_HELD:
                self._submit(_Op(gate.key, take=False, generation=done.result()))
            raise
        if generation == _NOT_HELD:
            return False
        read_with = None if read is None else (read, op.value)
        gate.generation, gate.tenure = generation, Tenure(gate.name, read_with)
        return True

    # -- the statements: every take and release waiting goes in the next one ------------------------------------
    def _submit(self, op: _Op) -> None:
        """Queue ``op`` for the next statement. A take starts one at once; a release waits up to
        :data:`RELEASE_LINGER_SECONDS` for a take to go with (under load most do: one statement per turn)."""
        self._pin(op.key)  # until the statement has run: a release still holds the lock until then
        self._queue.append(op)
        if self._sender is not None:
            return  # the running sender sends it next
        if op.take or self._closed:
            self._start()
        elif self._linger is None:
            self._linger = asyncio.get_running_loop().call_later(RELEASE_LINGER_SECONDS, self._start)

    def _start(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._sender is None and self._queue:
            self._sender = asyncio.ensure_future(self._send())

    async def _send(self) -> None:
        """While takes or releases wait: send them all in one statement, then the ones that came meanwhile."""
        try:
            while self._queue:
                # the takes of one kind of read (the first waiting) and every take without one and release
                read = next((op.read for op in self._queue if op.read is not None), self._last_read)
                self._last_read = read
                batch = [op for op in self._queue if op.read is None or op.read is read]
                self._queue = [op for op in self._queue if not (op.read is None or op.read is read)]
                await self._run(batch, read)
                await self._judge()
        finally:
            self._sender = None
            for verdict in self._verdicts:  # pragma: no cover - the sender ends early only with its event loop
                verdict.cancel()
            self._verdicts.clear()

    async def _judge(self) -> None:
        """Between two statements (the connection idle): the holdings that wait to learn whether the connection
        lives (:meth:`_confirm`) learn it; a lost one is dropped first."""
        if not self._verdicts:
            return
        verdicts, self._verdicts = self._verdicts, []
        if not self._alive(self._conn):
            await self._drop(self._conn)
        for verdict in verdicts:
            if not verdict.done():  # not cancelled meanwhile
                verdict.set_result(None)

    async def _run(self, batch: list[_Op], read: LockRead | None) -> None:
        # a release of a lock taken on a connection since dropped has nothing left to let go
        ops = []
        for op in batch:
            if op.take or op.generation == self._generation:
                ops.append(op)
            else:
                self._unpin(op.key)
        if not ops:
            return
        conn: psycopg.AsyncConnection[Any] | None = None
        fresh = True  # a connection that cannot be opened is not tried again
        try:
            conn, fresh = await self._connection()
            generation = self._generation
            keys, takes = [op.key for op in ops], [op.take for op in ops]
            if read is None:
                cur = await conn.execute(_STATEMENT, (keys, takes))
                results = [(granted, None) for (granted,) in await cur.fetchall()]
            else:
                cur = await conn.execute(read.statement, (keys, takes, [op.arg for op in ops]))
                results = [(granted, value) for granted, value in await cur.fetchall()]
        except Exception as exc:
            await self._failed(conn, ops, exc, again=not fresh and isinstance(exc, psycopg.OperationalError))
            return
        for op, (granted, value) in zip(ops, results, strict=True):
            op.value = value
            if op.done is not None and op.done.cancelled() and granted:
                # its caller is gone: the lock granted to it is given back (the release keeps the take's place)
                self._queue.append(_Op(op.key, take=False, generation=generation))
                continue
            if op.done is not None and not op.done.cancelled():
                op.done.set_result(generation if granted else _NOT_HELD)
            self._unpin(op.key)  # a granted lock keeps its gate's place

    async def _failed(
        self, conn: psycopg.AsyncConnection[Any] | None, ops: list[_Op], exc: Exception, *, again: bool
    ) -> None:
        """A statement that failed. The connection is dropped, so the releases in it (and every lock it held) are
        let go with it. Its takes are tried ``again`` on a new connection when this one was found broken (the
        database restarted since it was opened); otherwise they get the error."""
        if not isinstance(exc, psycopg.OperationalError):
            logger.warning("an advisory-lock statement failed (%s): reconnecting", type(exc).__name__)
        await self._drop(conn)
        for op in ops:
            if op.done is None or op.done.done():
                self._unpin(op.key)  # a release, or a take nobody waits for: its lock went with the connection
            elif again:
                self._queue.append(op)  # keeps its place
            else:
                op.done.set_exception(exc)
                self._unpin(op.key)

    # -- the connection --------------------------------------------------------------------------------------
    async def _connection(self) -> tuple[psycopg.AsyncConnection[Any], bool]:
        """The connection, and whether it was opened just now."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn, False
        async with self._connecting:
            if self._closed:
                raise RuntimeFaultError("the advisory locks are closed")
            if self._conn is not None and not self._conn.closed:
                return self._conn, False
            self._conn = await psycopg.AsyncConnection.connect(
                self._url,
                autocommit=True,
                connect_timeout=max(1, round(self._connect_timeout)),
                application_name=APPLICATION_NAME,
                options=f"-c lock_timeout={READ_LOCK_TIMEOUT_MS}",
            )
            self._conn.add_notice_handler(functools.partial(self._heard, self._generation))
            await self._check_capacity(self._conn)
            return self._conn, True

    async def _check_capacity(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Warn (once per connection) when ``max_held`` is not well under PostgreSQL's shared lock table."""
        cur = await conn.execute(
            "SELECT current_setting('max_locks_per_transaction')::int"
            " * (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int)"
        )
        row = await cur.fetchone()
        capacity = int(row[0]) if row is not None else 0
        if capacity and self.max_held > capacity // 4:
            logger.warning(
                "max_held=%d advisory locks per process (ROUTEGATE_DB_MAX_ADVISORY_LOCKS) is over a quarter of "
                "PostgreSQL's lock table (%d = max_locks_per_transaction x (max_connections + "
                "max_prepared_transactions)): lower it, or raise max_locks_per_transaction",
                self.max_held,
                capacity,
            )

    async def _drop(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        """Forget ``conn`` when it is still the connection (its locks go with it: those held are counted in the log)
        and close it. A connection already replaced is left alone with its successor."""
        if conn is None or conn is not self._conn:
            return
        held = sum(1 for gate in self._gates.values() if gate.generation == self._generation)
        self._conn = None
        self._generation += 1
        if held and not self._closed:
            logger.warning("the advisory-lock connection was lost while %d lock(s) were held: they are gone", held)
        try:
            await conn.close()
        except Exception:  # pragma: no cover - closing a broken connection
            logger.debug("closing the advisory-lock connection failed", exc_info=True)
