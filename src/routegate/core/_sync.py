"""Run a coroutine from synchronous code on a per-thread event loop that is reused between calls.

``asyncio.run`` builds and tears down a loop per call (hundreds of microseconds); a governed run costs a few
microseconds, so the sync wrappers (``RoutingAgent.run``, ``Plan.run``) keep one runner per thread instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from routegate.errors import ConfigurationError

T = TypeVar("T")

_local = threading.local()


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
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _local.runner = runner
    return runner.run(coro)
