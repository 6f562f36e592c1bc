"""One way to turn a run that reports events through a callback into an async iterator of those events.

Every runtime's interpreter takes an ``emit`` callback (``None`` when nobody listens, so a plain ``arun`` pays
nothing for events). :func:`stream_events` runs the interpreter as a task feeding a queue and yields what it
emits until the run's last event; closing the iterator early cancels the run. The routing agent, the Plan and the
support desk all stream through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import TypeVar

E = TypeVar("E")


class _Done:
    """Put on the queue when the run returned."""


_DONE = _Done()


async def stream_events(
    run: Callable[[Callable[[E], None]], Awaitable[object]], is_last: Callable[[E], bool]
) -> AsyncIterator[E]:
    """Yield the events ``run(emit)`` emits, up to and including the one ``is_last`` accepts."""
    queue: asyncio.Queue[E | BaseException | _Done] = asyncio.Queue()

    async def produce() -> None:
        try:
            await run(queue.put_nowait)
        except BaseException as exc:  # surfaced to the consumer below, then re-raised here
            queue.put_nowait(exc)
            raise
        queue.put_nowait(_DONE)  # a run that ended without its last event ends the stream too

    task = asyncio.create_task(produce())
    try:
        while True:
            item = await queue.get()
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
