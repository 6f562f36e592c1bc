"""Run a coroutine from synchronous code on a per-thread event loop that is reused between calls.

``asyncio.run`` builds and tears down a loop per call, and ``asyncio.Runner.run`` re-installs a SIGINT handler
per call: each costs more than a governed run itself. The sync wrappers (``RoutingAgent.run``, ``Plan.run``)
keep one loop per thread instead and close them all at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
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


def run_sync(coro: Coroutine[Any, Any, T], *, what: str = "run") -> T:
    """Run ``coro`` to completion; refuse (clearly) when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise ConfigurationError(
            f"{what}() was called from inside a running event loop; use 'await ...a{what}(...)' there instead"
        )
    return _thread_loop().run_until_complete(coro)
