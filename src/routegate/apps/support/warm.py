"""The embedded PostgreSQL kept warm between commands: a small watcher process is one more user of the server, and
leaves when the server has been idle for the keep-warm time.

pgserver already shares one server per data directory between processes: each process that attaches is listed in
the directory's ``.handle_pids.json``, and the last one to leave stops the server. So nothing here starts or stops
PostgreSQL. A command that attaches with a keep-warm time (``ROUTEGATE_DB_KEEP_WARM_SECONDS``) makes sure a
*watcher* (``python -m routegate.apps.support.warm``, detached, a few MB) is attached too; the command's own leave
then never stops the server. The watcher sleeps until the handle file (rewritten by pgserver whenever a process
attaches or leaves) has been untouched for the keep-warm time, and nobody else is attached; then it leaves, as the
last user, and pgserver stops the server. The watcher lives exactly as long as the server it keeps: it never
outlives it, and there is no daemon to manage.

Beside the data directory, in ``<pgdata>.warm/``:

* ``lock``: taken (``flock``) by a command while it attaches and makes sure of the watcher, and by the watcher while
  it decides to leave and stops the server. Two commands at once start one server and one watcher; a command that
  arrives while the watcher stops the server waits, then starts it afresh.
* ``watcher.json``: the watcher's PID, the postmaster it keeps and its keep-warm time.
* ``watcher.log``: what the watcher wrote to its standard error (its failures).
* ``alive``: locked by the watcher for its whole life. The kernel drops the lock when the watcher exits, however it
  exits, so "is the watcher alive" never trusts a PID that may have been reused, and waiting for its exit is waiting
  for that lock (no polling).

A postmaster that crashed is started again by pgserver at the next attach (it reads ``postmaster.pid`` and checks
the process); the command then sees that the watcher keeps a postmaster that is gone, tells it to leave and starts
a watcher for the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from routegate.apps.support.embedded import HANDLE_FILE, EmbeddedPostgres, listed_users, process_alive

logger = logging.getLogger(__name__)

_LOCK: Final = "lock"
_RECORD: Final = "watcher.json"
_ALIVE: Final = "alive"
_LOG: Final = "watcher.log"


def warm_dir(pgdata: Path) -> Path:
    """Where the keep-warm files of the server in ``pgdata`` live (beside it: ``initdb`` wants an empty directory)."""
    return pgdata.with_name(pgdata.name + ".warm")


@contextlib.contextmanager
def warm_lock(pgdata: Path) -> Iterator[None]:
    """The lock a command holds while it attaches, and the watcher while it decides to leave (blocking)."""
    where = warm_dir(pgdata)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / _LOCK, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class WatcherRecord:
    """The watcher of a server: its PID, the postmaster it keeps, its keep-warm time."""

    pid: int
    postmaster_pid: int
    keep_warm_seconds: float


def read_record(pgdata: Path) -> WatcherRecord | None:
    """The record of the watcher that was last started, or None (none, or unreadable)."""
    try:
        raw = json.loads((warm_dir(pgdata) / _RECORD).read_text(encoding="utf-8"))
        return WatcherRecord(int(raw["pid"]), int(raw["postmaster_pid"]), float(raw["keep_warm_seconds"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def watcher_alive(pgdata: Path) -> bool:
    """A watcher of ``pgdata`` is alive: it holds its ``alive`` lock."""
    try:
        handle = open(warm_dir(pgdata) / _ALIVE, "rb")  # noqa: SIM115 (closed below; a with would hide the flow)
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def wait_for_watcher_exit(pgdata: Path) -> None:
    """Block until no watcher of ``pgdata`` is alive (its ``alive`` lock is released when it exits)."""
    try:
        handle = open(warm_dir(pgdata) / _ALIVE, "rb")  # noqa: SIM115 (closed below)
    except OSError:
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Postmaster:
    """A running postmaster, from its ``postmaster.pid``: PID, port and socket directory."""

    pid: int
    port: int | None
    socket_dir: str | None


def postmaster(pgdata: Path) -> Postmaster | None:
    """The postmaster running on ``pgdata`` (its ``postmaster.pid``: PID, data dir, start, port, socket dir, ...),
    if it is alive."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    if not process_alive(pid):
        return None
    port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
    socket_dir = lines[4].strip() or None if len(lines) > 4 else None
    return Postmaster(pid, port, socket_dir)


def running_postmaster(pgdata: Path) -> int | None:
    """The PID of the postmaster running on ``pgdata``, if it is alive."""
    found = postmaster(pgdata)
    return found.pid if found is not None else None


def warm_status(pgdata: Path) -> dict[str, Any]:
    """How the server of ``pgdata`` is used: its socket and port, the processes attached (its watcher apart), and,
    when a watcher keeps it, the watcher's PID, its keep-warm time and the seconds left before it stops idle."""
    found = postmaster(pgdata)
    record = read_record(pgdata)
    watcher = record if record is not None and watcher_alive(pgdata) else None
    users = [pid for pid in listed_users(pgdata) or [] if watcher is None or pid != watcher.pid]
    return {
        "port": found.port if found else None,
        "socket_dir": found.socket_dir if found else None,
        "users": users,
        "watcher_pid": watcher.pid if watcher else None,
        "keep_warm_seconds": watcher.keep_warm_seconds if watcher else None,
        "idle_seconds_left": idle_seconds_left(pgdata, watcher.keep_warm_seconds) if watcher else None,
    }


def idle_seconds_left(pgdata: Path, keep_warm_seconds: float) -> float:
    """Seconds until the server counts as idle: the last attach or leave (the handle file's time) plus the
    keep-warm time, minus now (negative: idle already)."""
    try:
        touched = (Path(pgdata) / HANDLE_FILE).stat().st_mtime
    except OSError:
        return 0.0
    return touched + keep_warm_seconds - time.time()


def keep_warm(pgdata: Path, postmaster_pid: int, keep_warm_seconds: float) -> None:
    """Make sure a watcher keeps the server of ``pgdata`` (postmaster ``postmaster_pid``) warm; call it holding
    :func:`warm_lock`, after attaching. A watcher started here has attached when this returns (so that a second
    command, waiting for the lock, finds it), which costs a command that started the server a few tenths of a
    second, and a command that found it warm nothing."""
    record = read_record(pgdata)
    alive = watcher_alive(pgdata)
    if alive and record is not None and record.postmaster_pid == postmaster_pid:
        return
    if alive and record is not None:  # it keeps a postmaster that is gone (crashed, restarted): tell it to leave
        logger.info("embedded PostgreSQL: its watcher %s keeps a postmaster that is gone; starting another", record.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
    where = warm_dir(pgdata)
    with open(where / _LOG, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(pgdata.resolve()), repr(float(keep_warm_seconds))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # not in the terminal's process group: Ctrl-C on the command leaves it alone
            cwd=str(where),
        )
    assert process.stdout is not None
    with process.stdout as out:
        said = out.readline().strip()  # "ready", or the end of the pipe when the watcher failed
    process.wait()  # the intermediate process, which exits as soon as it has forked the watcher off
    if said != b"ready":
        logger.warning(
            "the embedded PostgreSQL could not be kept warm: its watcher did not start (see %s)", where / _LOG
        )


@dataclass(frozen=True)
class StopOutcome:
    """What :func:`stop_server` did: ``stopped`` the postmaster ``pid``; or not, because ``users`` still use it."""

    pid: int | None
    stopped: bool
    users: tuple[int, ...] = ()


def stop_server(pgdata: Path) -> StopOutcome:
    """Stop the embedded server of ``pgdata`` now unless a process other than its watcher uses it: the watcher is
    told to leave (the last user leaving, pgserver stops the server); a server left with no user at all (its
    watcher killed) is attached to and left, which stops it the same way."""
    if not pgdata.is_dir():
        return StopOutcome(None, stopped=False)
    with warm_lock(pgdata):
        pid = running_postmaster(pgdata)
        record = read_record(pgdata)
        alive = watcher_alive(pgdata)
    if pid is None:
        return StopOutcome(None, stopped=False)
    if alive and record is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, signal.SIGTERM)
        wait_for_watcher_exit(pgdata)
    with warm_lock(pgdata):
        if running_postmaster(pgdata) is None:
            return StopOutcome(pid, stopped=True)
        users = listed_users(pgdata)
        if users is None or users:
            return StopOutcome(pid, stopped=False, users=tuple(users or ()))
        server = EmbeddedPostgres(pgdata)
        server.start()
        server.stop()
    return StopOutcome(pid, stopped=running_postmaster(pgdata) is None)


# -- the watcher process --------------------------------------------------------------------------------------
def _hold_alive_lock(pgdata: Path) -> None:
    """Lock ``alive`` until this process exits: the descriptor is never closed, so the kernel drops the lock only
    when the process is gone (after the server was stopped), not earlier during the interpreter's shutdown."""
    fd = os.open(warm_dir(pgdata) / _ALIVE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)


def _others_attached(pgdata: Path) -> bool:
    users = listed_users(pgdata)
    return users is None or bool(users)  # unreadable (being rewritten): as if in use, look again later


def watch(pgdata: Path, keep_warm_seconds: float, *, stop: threading.Event) -> None:
    """Attach to the server of ``pgdata``, say ``ready`` on standard output, and leave once the server has been
    idle for ``keep_warm_seconds`` with nobody else attached (or when ``stop`` is set, or its postmaster is gone)."""
    _hold_alive_lock(pgdata)
    server = EmbeddedPostgres(pgdata)
    postmaster: int | None = None
    try:
        server.start()
        postmaster = server.pid
        record = WatcherRecord(os.getpid(), postmaster, keep_warm_seconds)
        (warm_dir(pgdata) / _RECORD).write_text(json.dumps(asdict(record)), encoding="utf-8")
        print("ready", flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the command reading our "ready" sees the end of the pipe now
        os.close(devnull)
        while not stop.is_set():
            left = idle_seconds_left(pgdata, keep_warm_seconds)
            if left > 0 and process_alive(postmaster):
                stop.wait(left)
                continue
            with warm_lock(pgdata):
                if not process_alive(postmaster):
                    break  # restarted by a command, which started another watcher: leave without stopping
                if idle_seconds_left(pgdata, keep_warm_seconds) > 0:
                    continue  # a command came and went while we waited for the lock
                if not _others_attached(pgdata):
                    server.stop()  # the last user leaves: pgserver stops the server, under the lock
                    break
            stop.wait(keep_warm_seconds)  # still in use (a server, a chat): look again after another idle time
    finally:
        if postmaster is not None and not process_alive(postmaster):
            server.leave()  # its postmaster crashed or was replaced: never stop the server a command started since
        else:
            server.stop()


def main(argv: list[str]) -> int:
    """``python -m routegate.apps.support.warm PGDATA SECONDS``: fork off the watcher and return at once."""
    pgdata, seconds = Path(argv[0]), float(argv[1])
    if os.fork() > 0:  # the command waits for this process; the watcher is its child, adopted when it exits
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    watch(pgdata, seconds, stop=stop)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
