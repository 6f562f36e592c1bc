"""One way to turn a run that reports events through a callback into an async iterator of those events.

Every runtime's interpreter takes an ``emit`` callback (``None`` when nobody listens, so a plain ``arun`` pays
nothing for events). :func:`stream_events` runs the interpreter as a task feeding a buffer and yields what it
emits until the run's last event; closing the iterator early cancels the run. Every runtime (both agents, the
dispatcher, the support desk) and the Plan stream through it.

The buffer is a plain deque with one waiter, not an :class:`asyncio.Queue`: one producer, one consumer, no bound,
so an event costs an append and, when the consumer is waiting, one wake-up (a desk turn emits ~30 token events;
the queue's bookkeeping per ``put``/``get`` was a tenth of a turn's CPU, ``docs/benchmarks/support.md``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import TypeVar

E = TypeVar("E")


class _Done:
    """Put in the buffer when the run returned."""


_DONE = _Done()


async def stream_events(
    run: Callable[[Callable[[E], None]], Awaitable[object]], is_last: Callable[[E], bool]
) -> AsyncIterator[E]:
    """Yield the events ``run(emit)`` emits, up to and including the one ``is_last`` accepts."""
    buffer: deque[E | BaseException | _Done] = deque()
    waiter: list[asyncio.Future[None]] = []  # the consumer's, while it waits for the buffer to fill

    def put(item: E | BaseException | _Done) -> None:
        buffer.append(item)
        if waiter:
            woken = waiter.pop()
            if not woken.done():
                woken.set_result(None)

    async def produce() -> None:
        try:
            await run(put)
        except BaseException as exc:  # surfaced to the consumer below, then re-raised here
            put(exc)
            raise
        put(_DONE)  # a run that ended without its last event ends the stream too

    loop = asyncio.get_running_loop()
    task = loop.create_task(produce())
    try:
        while True:
            if not buffer:
                woken = loop.create_future()
                waiter.append(woken)
                try:
                    await woken
                finally:
                    waiter.clear()
                continue
            item = buffer.popleft()
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _Done):
                return
            yield item
            if is_last(item):
                return
    finally:
        if not task.done():
            task.cancel()
        with suppress(BaseException):
            await task
