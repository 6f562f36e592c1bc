"""Database connections shared fairly between tenants.

The desk's connection pool is first come, first served: a tenant that keeps 64 turns running queues every other
tenant's turn behind its own. :class:`FairShare` sits in front of the pool with one slot per pooled connection.
A caller that finds no free slot waits in its tenant's queue, and a freed slot goes to the tenants in turn
(round robin), so another tenant's request waits for at most one release per waiting tenant, however many
requests the flooding tenant has queued.

Callers name their tenant: the turn's, which the desk's database is given with each connection it hands out
(:meth:`~routegate.apps.support.db.SupportDatabase.connection`).

Two bounds end a wait with :class:`~psycopg_pool.PoolTimeout` (which the desk reports as ``server_busy``):
``stall_seconds`` without any slot coming free (every connection is stuck: waiting longer helps nobody), and
``max_wait_seconds`` in all. Time the event loop spent behind (a wake-up that came late) does not count as a stall. A queue that moves keeps its callers waiting: a tenant's own flood slows its own
turns, it does not fail them.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final

from routegate._extras import needs

with needs("desk"):
    from psycopg_pool import PoolTimeout


LOOP_LAG_SECONDS: Final = 0.1
"""A wake-up later than this is put down to the event loop being behind (a flood to answer), and the time is not
counted towards the stall bound: the connections may have been released in that time, unseen."""


class FairShare:
    """``capacity`` slots, handed out round robin between the tenants waiting for one.

    ``acquire(tenant)`` returns once the caller holds a slot; ``release()`` gives it back (to the next tenant in
    turn, or to the free count). A caller cancelled while waiting leaves no slot behind."""

    def __init__(
        self,
        capacity: int,
        *,
        stall_seconds: float,
        max_wait_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1 or stall_seconds <= 0 or max_wait_seconds <= 0:
            raise ValueError(
                f"FairShare needs capacity >= 1 and positive waits, got {capacity}, {stall_seconds}, {max_wait_seconds}"
            )
        self.capacity = capacity
        self.stall_seconds = stall_seconds
        self.max_wait_seconds = max_wait_seconds
        self._clock = clock
        self._free = capacity
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self._last_release = clock()

    @property
    def free(self) -> int:
        return self._free

    def waiting(self, tenant: str | None = None) -> int:
        """Callers waiting for a slot: all of them, or ``tenant``'s."""
        if tenant is not None:
            return len(self._waiting.get(tenant, ()))
        return sum(len(queue) for queue in self._waiting.values())

    async def acquire(self, tenant: str) -> None:
        if self._free and not self._waiting:
            self._free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.get(tenant)
        if queue is None:
            queue = self._waiting[tenant] = deque()
        queue.append(granted)
        started = self._clock()
        lag = 0.0  # how late this caller's wake-ups came: time the event loop was behind is not a stuck pool
        try:
            while not granted.done():
                now = self._clock()
                stalled_at = max(self._last_release, started) + self.stall_seconds + lag
                limit = min(stalled_at, started + self.max_wait_seconds) - now
                if limit <= 0:
                    raise PoolTimeout(self._timeout_message(now - started, stalled_at <= now))
                # on its timeout, look again: a slot released meanwhile moves the stall bound
                await asyncio.wait((granted,), timeout=limit)
                late = self._clock() - (now + limit)
                if late > LOOP_LAG_SECONDS and not granted.done():
                    lag += late
        except BaseException:
            if granted.done() and not granted.cancelled():
                self.release()  # the slot came just as the caller gave up: pass it on
            else:
                granted.cancel()
                self._forget(tenant, granted)
            raise

    def release(self) -> None:
        self._last_release = self._clock()
        while self._waiting:
            tenant, queue = next(iter(self._waiting.items()))
            granted = queue.popleft()
            if queue:
                self._waiting.move_to_end(tenant)  # the tenant waits for its next turn behind the others
            else:
                del self._waiting[tenant]
            if not granted.done():
                granted.set_result(None)
                return
        self._free += 1

    def _forget(self, tenant: str, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is None:
            return
        try:
            queue.remove(granted)
        except ValueError:
            return
        if not queue:
            del self._waiting[tenant]

    def _timeout_message(self, waited: float, stalled: bool) -> str:
        if stalled:
            return (
                f"no database connection came free for {self.stall_seconds:g} s "
                f"(all {self.capacity} are busy; waited {waited:.1f} s)"
            )
        return f"no database connection came free within {self.max_wait_seconds:g} s"
