"""The run deadline: one mechanism for every runtime, a slimmer ``asyncio.timeout``.

It cancels the running task when the deadline passes and turns that cancellation (and only that one) into
``TimeoutError`` on exit, leaving cancellations from elsewhere alone — the same contract as
``asyncio.timeout``. :meth:`Deadline.of` bounds a block by a :class:`~routegate.core.RunContext`'s deadline, so
every step of a run answers to the same clock.

The deadlines armed on one event loop share one timer handle, set for the earliest of them (:class:`_Watch`):
arming a deadline that is not the earliest is a dict insert, where a timer handle per deadline cost a
``TimerHandle``, a heap push and, at exit, its cancellation and removal (about a tenth of a routing agent's run
that waits on a worker thread; docs/benchmarks/core.md). Runs of the same budget start with ever later deadlines,
so the handle is set again only when it fires.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from routegate.core.context import RunContext


class Deadline:
    """``async with Deadline(seconds):`` — the block is cancelled after ``seconds`` (``inf``: never);
    ``async with Deadline.until(at):`` — at ``at`` on the ``time.monotonic()`` clock (a run's ``RunContext.deadline``).

    A caller already in the task may :meth:`arm` and :meth:`disarm` it instead of ``async with``: ``disarm`` says
    whether the cancellation that ended the block was the deadline's."""

    __slots__ = ("_at", "_cancelling", "_fixed", "_seconds", "_task", "_watch", "expired")

    def __init__(self, seconds: float, *, at: float | None = None) -> None:
        self._seconds = seconds
        self._fixed = at  # a fixed time on time.monotonic(); None: ``seconds`` from when it is armed
        self._at = math.inf  # when the armed deadline passes
        self.expired = False

    @classmethod
    def of(cls, ctx: RunContext[Any]) -> Deadline:
        """The deadline of ``ctx``'s run, from now."""
        return cls(max(ctx.remaining(), 0.0))

    @classmethod
    def until(cls, at: float) -> Deadline:
        """The deadline at ``at`` on the ``time.monotonic()`` clock (a run's ``RunContext.deadline``)."""
        left = at - time.monotonic()
        return cls(left if left > 0.0 else 0.0, at=at)

    @property
    def seconds(self) -> float:
        return self._seconds

    def arm(self) -> None:
        """Start the clock for the running task (it is cancelled when the deadline passes)."""
        at = self._fixed
        if at is None:
            seconds = self._seconds
            at = math.inf if seconds == math.inf else time.monotonic() + seconds
        self._arm(at)

    def _arm(self, at: float) -> None:
        loop = asyncio.get_running_loop()  # raises RuntimeError outside a running event loop
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("Deadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        if at == math.inf:
            self._watch = None
            return
        self._at = at
        watch = _watches.watch
        if watch is None or watch.loop is not loop:
            watch = _watches.watch = _Watch(loop)
        self._watch = watch
        watch.armed[self] = None
        if at < watch.at:  # earlier than the watch's handle: set it for this one (a later one costs nothing)
            watch.fire_at(at)

    def disarm(self, cancelled: bool) -> bool:
        """Stop the clock; ``cancelled``: the block ended with a cancellation. ``True`` when that cancellation
        was this deadline's (the caller turns it into its timeout), ``False`` for anything else."""
        watch = self._watch
        if watch is not None:
            watch.armed.pop(self, None)
        return self.expired and self._task.uncancel() <= self._cancelling and cancelled

    def _expire(self) -> None:
        self.expired = True
        self._task.cancel()

    async def __aenter__(self) -> Deadline:
        self.arm()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.disarm(exc_type is asyncio.CancelledError):
            raise TimeoutError(f"deadline of {self._seconds}s passed") from exc


class _Watch:
    """The deadlines armed on one event loop, and the one timer handle that fires at the earliest of them."""

    __slots__ = ("armed", "at", "handle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.armed: dict[Deadline, None] = {}  # an ordered set: the oldest first
        self.at = math.inf  # when the handle fires (time.monotonic()); inf: no handle
        self.handle: asyncio.TimerHandle | None = None

    def fire_at(self, at: float) -> None:
        """Set the handle for ``at`` (on the ``time.monotonic()`` clock)."""
        if self.handle is not None:
            self.handle.cancel()
        self.at = at
        loop = self.loop
        self.handle = loop.call_at(loop.time() + (at - time.monotonic()), self._fire)

    def _fire(self) -> None:
        """Expire every deadline that passed; set the handle for the earliest left, if any."""
        self.handle, self.at = None, math.inf
        now = time.monotonic()
        passed = [deadline for deadline in self.armed if deadline._at <= now]
        for deadline in passed:
            del self.armed[deadline]
            deadline._expire()
        if self.armed:
            self.fire_at(min(deadline._at for deadline in self.armed))


class _Watches(threading.local):
    """Each thread's watch: of the event loop that last armed a deadline in it."""

    watch: _Watch | None = None


_watches = _Watches()
