"""The embedded PostgreSQL (16 + pgvector, from the ``pgserver`` package) and how a command gets it started early.

* :class:`EmbeddedPostgres` starts the server in a data directory, or attaches to the one already running there:
  pgserver shares one server per data directory between processes (its ``.handle_pids.json`` lists the users),
  so a one-shot command next to ``routegate up`` / ``serve`` on the same ``ROUTEGATE_DATA_DIR`` connects to the
  running server (milliseconds) and leaves it running; the server stops when its last user leaves.
* :class:`DatabaseStart` makes the database of the settings ready on a background thread, so that a command can
  start it before it imports the desk's modules: the start (~0.1 s, mostly waiting for the server) hides behind
  the imports. With ``DATABASE_URL`` there is nothing to start.

This module imports neither the database driver nor pgserver until a server is started (``routegate ask``
imports it before the rest of the desk).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Final

from routegate._extras import needs
from routegate.errors import RuntimeFaultError
from routegate.settings import Settings

logger = logging.getLogger(__name__)


class DatabaseUnavailableError(RuntimeFaultError):
    """The database could not be reached or set up."""


def _import_pgserver() -> Any:
    # pgserver asks platformdirs for the user's runtime directory when it is imported. Without XDG_RUNTIME_DIR
    # (containers, CI, root shells) platformdirs falls back to /tmp/runtime-<uid> and warns. The fallback is
    # what we want (it only holds pgserver's lock file and socket directory), so that one warning is muted here,
    # at the one place that triggers it, instead of globally.
    if "pgserver" in sys.modules:  # imported already: no need to touch the (process-wide) warning filters
        return sys.modules["pgserver"]
    from platformdirs import RuntimeDirWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeDirWarning)
        with needs("desk"):
            import pgserver

    return pgserver


class EmbeddedPostgres:
    """PostgreSQL 16 + pgvector from the ``pgserver`` package, with its data in ``data_dir``.

    ``keep_warm_seconds`` > 0: the server stays up that long after its last user left (a watcher process keeps it:
    :mod:`routegate.apps.support.warm`), so that the next command attaches instead of starting it; 0 (default):
    the last user to leave stops it."""

    def __init__(self, data_dir: Path, *, keep_warm_seconds: float = 0.0) -> None:
        self.data_dir = Path(data_dir)
        self.keep_warm_seconds = keep_warm_seconds
        self._server: Any = None

    def start(self) -> str:
        """Start (or attach to) the server and return its connection URI. Blocking: ~1 s on first start."""
        pgserver = _import_pgserver()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.keep_warm_seconds <= 0:
            return self._attach(pgserver)
        from routegate.apps.support.warm import keep_warm, warm_lock

        with warm_lock(self.data_dir):
            uri = self._attach(pgserver)
            keep_warm(self.data_dir, self.pid, self.keep_warm_seconds)
        return uri

    def _attach(self, pgserver: Any) -> str:
        try:
            _forget_dead_users(pgserver, self.data_dir)
            _forget_dead_postmaster(pgserver, self.data_dir)
            self._server = pgserver.get_server(self.data_dir, cleanup_mode="stop")
        except Exception as exc:
            raise DatabaseUnavailableError(
                f"could not start the embedded PostgreSQL in {self.data_dir}: {type(exc).__name__}: {exc}"
            ) from exc
        return str(self._server.get_uri())

    @property
    def pid(self) -> int:
        """The postmaster's PID (started)."""
        if self._server is None:
            raise RuntimeError("the embedded PostgreSQL is not started: call start() first")
        return int(self._server.get_pid())

    def stop(self) -> None:
        """Leave the server; the last user to leave stops it (a warm server's watcher is a user)."""
        if self._server is not None:
            server, self._server = self._server, None
            server.cleanup()

    def leave(self) -> None:
        """Leave the server without stopping it, even as its last user: for a user whose postmaster is gone (a
        crash, a restart by another command). pgserver would otherwise stop whatever server now runs on the data
        directory, since it checks its old postmaster with ``psutil``, to which a zombie is running."""
        if self._server is not None:
            server, self._server = self._server, None
            server.cleanup_mode = None  # pgserver's documented "neither stop nor delete" (``get_server``)
            server.cleanup()


HANDLE_FILE: Final = ".handle_pids.json"


def process_alive(pid: int) -> bool:
    """A running process (not a zombie) has this PID."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): trust kill(0)
    return state not in ("Z", "X")


def _listed(path: Path) -> list[int] | None:
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # no file yet (first start), or unreadable: pgserver handles it
    return pids if isinstance(pids, list) else None


def _forget_dead_users(pgserver: Any, data_dir: Path) -> None:
    """pgserver lists the PIDs of the processes using a data directory in ``.handle_pids.json`` and stops the server
    when the last one leaves; a process killed before it could leave (SIGKILL, a crash) stays listed and the server
    would never be stopped again. Drop such PIDs, under pgserver's own lock, before attaching."""
    handles = Path(data_dir).expanduser().resolve() / HANDLE_FILE
    with pgserver.PostgresServer._lock:
        pids = _listed(handles)
        if pids is None:
            return
        alive = [pid for pid in pids if isinstance(pid, int) and (pid == os.getpid() or process_alive(pid))]
        if alive != pids:
            gone = [pid for pid in pids if pid not in alive]
            logger.info("embedded PostgreSQL: forgetting users that died without leaving: %s", gone)
            handles.write_text(json.dumps(alive))


def _forget_dead_postmaster(pgserver: Any, data_dir: Path) -> None:
    """pgserver trusts ``postmaster.pid`` while its PID exists, and a postmaster that crashed is a zombie — its PID
    still exists — until its parent reaps it, which never happens where PID 1 reaps nothing (some containers): the
    next attach would then connect to a dead server forever. A ``postmaster.pid`` whose process is gone or a zombie is
    stale (PostgreSQL rewrites it at start): drop it and its socket's lock file, under pgserver's lock, so the attach
    starts the server again."""
    pidfile = Path(data_dir).expanduser().resolve() / "postmaster.pid"
    with pgserver.PostgresServer._lock:
        try:
            lines = pidfile.read_text().splitlines()
        except OSError:
            return
        if not lines or not lines[0].strip().isdigit() or process_alive(int(lines[0])):
            return
        logger.info("embedded PostgreSQL: postmaster %s is gone; starting the server again", lines[0].strip())
        # its socket's lock file names it too, and PostgreSQL takes a zombie's PID for a running postmaster
        if len(lines) > 4 and lines[3].strip().isdigit() and lines[4].strip():
            (Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock").unlink(missing_ok=True)
        pidfile.unlink(missing_ok=True)


def listed_users(data_dir: Path) -> list[int] | None:
    """The live processes (other than this one) attached to the server of ``data_dir``; None when pgserver's list
    cannot be read (being rewritten: ask again)."""
    handles = Path(data_dir).expanduser().resolve() / HANDLE_FILE
    if not handles.exists():
        return []
    pids = _listed(handles)
    if pids is None:
        return None
    return [pid for pid in pids if isinstance(pid, int) and pid != os.getpid() and process_alive(pid)]


def embedded_data_dir(settings: Settings) -> Path:
    """Where the embedded server of ``settings`` keeps its data."""
    return settings.data_dir / "support-pg"


def embedded_server(settings: Settings) -> EmbeddedPostgres:
    """The embedded server of ``settings``: in its data dir, kept warm ``ROUTEGATE_DB_KEEP_WARM_SECONDS``."""
    return EmbeddedPostgres(embedded_data_dir(settings), keep_warm_seconds=settings.db_keep_warm_seconds)


class DatabaseStart:
    """The database of ``settings`` made ready on a background thread: :meth:`result` waits for it and gives the
    URL and, for the embedded server, the handle that :meth:`stop` closes. ``stop`` is idempotent and safe at any
    time (it waits for a start under way, then stops what it started), so every exit path may call it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._url: str | None = None
        self._server: EmbeddedPostgres | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        if not settings.database_url:
            # here, not on the thread: its import mutes a warning, and the warning filters are process-wide
            _import_pgserver()
        self._thread = threading.Thread(target=self._start, name="routegate-database-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            if self._settings.database_url:
                self._url = self._settings.database_url
                return
            server = embedded_server(self._settings)
            self._url = server.start()
            with self._lock:
                self._server = server
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> tuple[str, EmbeddedPostgres | None]:
        """The URL to connect to and the embedded server's handle (``None`` with ``DATABASE_URL``). Blocking."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._url is not None
        return self._url, self._server

    def stop(self) -> None:
        """Stop the embedded server if this start attached to it (once). Blocking."""
        self._thread.join()
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop()
