"""Run a coroutine from synchronous code on a per-thread event loop that is reused between calls.

``asyncio.run`` builds and tears down a loop per call, and ``asyncio.Runner.run`` re-installs a SIGINT handler
per call: each costs more than a governed run itself. The sync wrappers (``RoutingAgent.run``, ``Plan.run``, the
desk's and the dispatcher's) keep one loop per thread instead and close them all at interpreter exit.

Even ``loop.run_until_complete`` costs about 12 µs a call (it installs async-generator hooks, a stop callback and
runs at least two loop iterations). On asyncio's own selector loops :func:`run_sync` steps the loop itself until
the task is done — the same iterations ``run_forever`` makes, without the per-call set-up; when the task's first
step is the only callback due it runs it without polling the selector first — which brings a sync run within a
few microseconds of ``await arun()``. Any other loop class (uvloop installed as the policy) gets
``run_until_complete``.

One branch needs no loop at all: a coroutine its caller knows can never suspend (``Plan.run`` of a plan whose
steps are all synchronous) is driven with a single ``send`` (``loopless=True``).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from routegate.errors import ConfigurationError

T = TypeVar("T")

_get_running_loop = asyncio._get_running_loop  # get_running_loop() without raising when there is none
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
    if _get_running_loop() is not None:
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
    if not isinstance(loop, asyncio.BaseEventLoop) or not hasattr(loop, "_run_once"):
        return loop.run_until_complete(coro)  # pragma: no cover - a third-party loop class
    return _step_until_done(loop, coro)


def _step_until_done(loop: asyncio.BaseEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    task = loop.create_task(coro)
    run_once = loop._run_once  # type: ignore[attr-defined]  # asyncio's own iteration step
    loop._thread_id = threading.get_ident()  # type: ignore[attr-defined]  # loop.is_running() is True inside
    asyncio.events._set_running_loop(loop)
    try:
        try:
            ready = loop._ready  # type: ignore[attr-defined]
            if len(ready) == 1:  # only the task's first step is due: run it without polling the selector
                ready.popleft()._run()
            while not task.done():
                run_once()
        except BaseException:  # Ctrl-C (or SystemExit) mid-run: cancel the run and let it unwind, then re-raise
            task.cancel()
            while not task.done():
                run_once()
            raise
    finally:
        asyncio.events._set_running_loop(None)
        loop._thread_id = None  # type: ignore[attr-defined]
    return task.result()
