"""Stopping on a signal: SIGTERM is handled like Ctrl-C, so ``finally`` blocks and context managers stop what the
command started (the server, the UI, the embedded PostgreSQL) before the process exits.

:func:`terminate_like_interrupt` makes SIGTERM raise :class:`Terminated` (a :class:`KeyboardInterrupt`) in the
main thread, wherever it is (a blocking ``input()``, the event loop's wait): the command's coroutine unwinds, or
``asyncio.run`` cancels it, and its clean-up runs. :func:`exit_status` gives 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM received: unwind as for Ctrl-C, exit 143."""


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal's number: 143 for SIGTERM, 130 for SIGINT (Ctrl-C)."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    # once: a second SIGTERM during the clean-up must not cut it short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


@contextlib.contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises :class:`Terminated` in the main thread; the previous handler is restored after.
    Outside the main thread (an embedding application) its handlers are left alone."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
