"""uvicorn's two runners, adapted to the CLI's signal rule (Ctrl-C exits 130, SIGTERM 143, after a full clean-up).

Imported by ``serve`` / ``up`` only: uvicorn is not part of the one-shot commands' start-up.

* :class:`QuietSignalsServer` — one server process: the signals are the event loop's and only ask it to stop.
* :class:`SignalledSupervisor` — ``serve --workers N``: uvicorn's multiprocess supervisor stops its workers on
  SIGINT / SIGTERM and returns normally, so the command would exit 0; this one remembers which signal stopped it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Final

from routegate._extras import needs

with needs("server"):
    import uvicorn
    from uvicorn.supervisors import Multiprocess

_END_WITHIN: Final = 5.0  # seconds the requests ended at shutdown get to send their last bytes


class QuietSignalsServer(uvicorn.Server):
    """uvicorn re-raises a captured Ctrl-C once it has stopped, which would cancel our cleanup (stopping the UI,
    the desk and PostgreSQL) half-way. Here the signals are the event loop's: they only ask the server to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    stopped_by = 0  # the signal that asked the server to stop

    def request_exit(self, signum: int = 0) -> None:
        self.stopped_by = self.stopped_by or signum
        if self.should_exit:
            self.force_exit = True  # a second Ctrl-C: stop waiting for open connections
        self.should_exit = True

    async def end_open_requests(self, end: Callable[[], object], *, within: float = _END_WITHIN) -> None:
        """After :meth:`serve` returned: when requests are still open (a second Ctrl-C cut the wait for them
        short), ``end`` makes the app answer them (:func:`routegate.server.app.end_open_requests`), and their tasks
        are given ``within`` seconds to finish, so none is cancelled mid-flight (a client reading a stream that just
        stops, a ``CancelledError`` traceback)."""
        tasks = set(self.server_state.tasks)
        if not tasks:
            return
        end()
        await asyncio.wait(tasks, timeout=within)


class SignalledSupervisor(Multiprocess):
    """uvicorn's supervisor of worker processes, remembering the signal that stopped it (``stopped_by``: 0 when
    it stopped for another reason, such as workers that could not start). It still terminates and joins every
    worker before :meth:`run` returns."""

    stopped_by = 0

    def handle_int(self) -> None:
        self.stopped_by = self.stopped_by or signal.SIGINT
        super().handle_int()

    def handle_term(self) -> None:
        self.stopped_by = self.stopped_by or signal.SIGTERM
        super().handle_term()
