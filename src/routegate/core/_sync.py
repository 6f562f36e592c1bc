"""Run a coroutine from synchronous code on a per-thread event loop that is reused between calls.

``asyncio.run`` builds and tears down a loop per call, which costs more than a governed run itself. The sync
wrappers (``RoutingAgent.run``, ``Plan.run``, the desk's and the dispatcher's) keep one loop per thread instead,
drive it with the loop's own ``run_until_complete``, and close every such loop at interpreter exit.

A Ctrl-C (or any other exception escaping the loop) while a run waits cancels the run and lets it unwind (its
``finally`` blocks run) before the exception goes on to the caller.

One branch needs no loop at all: a coroutine its caller knows can never suspend (``Plan.run`` of a plan whose
steps are all synchronous) is driven with a single ``send`` (``loopless=True``).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any, TypeVar

from routegate.errors import ConfigurationError

T = TypeVar("T")

_local = threading.local()
_loops: list[asyncio.AbstractEventLoop] = []
_loops_lock = threading.Lock()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
        with _loops_lock:
            _loops.append(loop)
    return loop


@atexit.register
def _close_loops() -> None:
    with _loops_lock:
        for loop in _loops:
            if not loop.is_closed() and not loop.is_running():
                loop.close()
        _loops.clear()


def run_sync(coro: Coroutine[Any, Any, T], what: str = "run", loopless: bool = False) -> T:
    """Run ``coro`` to completion; refuse (clearly) when called from inside a running event loop.

    ``loopless=True`` promises that ``coro`` never suspends (it awaits nothing that waits): it then runs right
    here, with one ``send`` and no event loop."""
    try:  # the public way to ask (it raises when no loop runs: about 0.5 µs a call)
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise ConfigurationError(
            f"{what}() was called from inside a running event loop; use 'await ...a{what}(...)' there instead"
        )
    if loopless:
        try:
            coro.send(None)
        except StopIteration as done:
            result: T = done.value
            return result
        coro.close()
        raise RuntimeError(f"internal error: {what}() was given a coroutine that suspended without an event loop")
    loop = _thread_loop()
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:  # Ctrl-C (or SystemExit) mid-run: cancel the run and let it unwind, then re-raise
        if not task.done():
            task.cancel()
            with suppress(BaseException):
                loop.run_until_complete(task)
        raise
