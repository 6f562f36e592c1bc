"""``routegate data`` / ``data stop`` / ``data reset``: where routegate keeps its data on this machine, whether its
embedded PostgreSQL runs, stopping it, and removing it all.

The data dir is ``ROUTEGATE_DATA_DIR``, by default the platform's user data directory (``platformdirs``:
``~/.local/share/routegate`` on Linux). It holds the embedded PostgreSQL (``support-pg``: conversations and the
desk's articles) and the support router fitted on first use (``support-router-<key>``), which is fitted again
when missing. Commands keep the embedded PostgreSQL running for ``ROUTEGATE_DB_KEEP_WARM_SECONDS`` after the last
one ended (:mod:`routegate.apps.support.warm`); ``stop`` stops it now. ``reset`` removes the whole directory, after
a confirmation (``--yes`` skips it), stopping a server that is only kept warm first; it refuses while a command
(``routegate up`` / ``serve`` / ``chat``) uses the embedded PostgreSQL, and when the directory holds anything else
(``ROUTEGATE_DATA_DIR`` pointing at the wrong place).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from routegate.apps.support.embedded import embedded_data_dir
from routegate.cli._command import add_command
from routegate.errors import ConfigurationError
from routegate.settings import Settings

_PARTS = (
    ("support-pg.warm", "what keeps the embedded PostgreSQL running between commands (its watcher's lock and record)"),
    ("support-pg", "the embedded PostgreSQL: conversations and the support desk's articles"),
    ("support-router-", "the support router fitted on first use (fitted again when missing)"),
    ("desk-examples-", "a desk's route examples embedded on first use (embedded again when missing)"),
)


def register(subparsers: Any) -> None:
    data = add_command(subparsers, "data", run_show)
    data.add_argument("--json", action="store_true", help="print one JSON object")
    actions = data.add_subparsers(title="data commands", metavar="ACTION")
    reset = add_command(actions, "reset", run_reset)
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_command(actions, "stop", run_stop)


def _size(path: Path) -> int:
    """Bytes of the files under ``path`` (symbolic links not followed; files that vanish meanwhile skipped)."""
    if path.is_symlink() or not path.is_dir():
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for root, _, files in os.walk(path, onerror=lambda error: None):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def human(size: int) -> str:
    """``1.5 MB`` (powers of 1024, as ``du -h``)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _parts(where: Path) -> list[dict[str, Any]]:
    out = []
    for entry in sorted(where.iterdir()) if where.is_dir() else []:
        what = next((text for prefix, text in _PARTS if entry.name.startswith(prefix)), "other files")
        out.append({"name": entry.name, "path": str(entry), "what": what, "bytes": _size(entry)})
    return out


def model_cache() -> dict[str, Any]:
    """The embedded encoder's model cache (the user cache directory, not the data dir): each int8 model file, and
    whether this install reads it (``None`` where that cannot be said: no ``embed`` extra)."""
    from routegate.embed._model_cache import PREFIX, default_cache_dir

    where = default_cache_dir()
    current = _model_read_here(where)
    files = [
        {
            "name": entry.name,
            "path": str(entry),
            "bytes": _size(entry),
            "current": None if current is None else entry == current,
        }
        for entry in (sorted(where.glob(f"{PREFIX}*.onnx")) if where.is_dir() else [])
    ]
    return {"dir": str(where), "bytes": sum(f["bytes"] for f in files), "files": files}


def _model_read_here(where: Path) -> Path | None:
    """The cache file this install's encoder loads (it may not exist yet); ``None`` without the ``embed`` extra."""
    from routegate.embed._model_cache import cache_file

    try:
        from routegate.embed.minilm import int8_cache_key

        return cache_file(int8_cache_key(), where)
    except (ConfigurationError, OSError):  # MissingExtraError included
        return None


def _model_cache_lines(cache: dict[str, Any]) -> list[str]:
    lines = [f"model cache: {cache['dir']}  (XDG_CACHE_HOME to move it; not removed by `routegate data reset`)"]
    for file in cache["files"]:
        what = (
            "not read by this install: an older build, or one of other versions' installs; remove it if none uses it"
            if file["current"] is False
            else "the embedded encoder's int8 model, built once (built again when missing)"
        )
        lines.append(f"  {human(file['bytes']):>9}  {file['name']}  — {what}")
    if not cache["files"]:
        lines.append("  (empty: the first command that embeds builds the encoder's model there)")
    return lines


def run_show(args: argparse.Namespace) -> int:
    """show where routegate keeps its data (embedded PostgreSQL, router cache) and its size; stop or reset it

    Show the data dir (ROUTEGATE_DATA_DIR, by default the platform's user data directory,
    ~/.local/share/routegate on Linux) and the size of each part: the embedded PostgreSQL (conversations,
    articles), the support router fitted on first use and your desks' example vectors; and whether the embedded PostgreSQL runs (its PID, socket,
    the commands using it, and how long it stays up idle: ROUTEGATE_DB_KEEP_WARM_SECONDS, default 300). Then the
    model cache (the user cache directory, ~/.cache/routegate on Linux): the embedded encoder's int8 model, built
    once per set of versions, and the files this install does not read (older builds after an upgrade, installs
    of other versions).
    `routegate data stop` stops it now; `routegate data reset` removes it all.
    """
    settings = Settings()
    where = settings.data_dir
    parts = _parts(where)
    total = sum(part["bytes"] for part in parts)
    server = server_status(embedded_data_dir(settings))
    if args.json:
        out = {"data_dir": str(where), "exists": where.is_dir(), "bytes": total, "parts": parts}
        running = server["pid"] if server is not None else None
        shown = {**out, "postgres_running_pid": running, "postgres": server, "model_cache": model_cache()}
        print(json.dumps({**shown, **_url_set(settings)}))
        return 0
    print(f"data dir: {where}  (ROUTEGATE_DATA_DIR to change it)")
    if not where.is_dir():
        print("  (does not exist yet: the first command that needs it creates it)")
        print("\n".join(_model_cache_lines(model_cache())))
        return 0
    for part in parts:
        print(f"  {human(part['bytes']):>9}  {part['name']}  — {part['what']}")
    print(f"  {human(total):>9}  in all")
    print("\n".join(status_lines(server)))
    if settings.database_url:
        print("DATABASE_URL is set: the support desk uses that server; its data is not in this directory")
    print("`routegate data reset` removes it all (conversations included)")
    print("\n".join(_model_cache_lines(model_cache())))
    return 0


def _url_set(settings: Settings) -> dict[str, bool]:
    return {"database_url_set": bool(settings.database_url)}


def server_status(pgdata: Path) -> dict[str, Any] | None:
    """The embedded PostgreSQL of ``pgdata`` if it runs: its PID, socket directory and port, the processes using it
    and, when a watcher keeps it warm, the watcher's PID and the seconds it stays up idle."""
    from routegate.apps.support.warm import running_postmaster, warm_status

    pid = running_postmaster(pgdata)
    if pid is None:
        return None
    return {"pid": pid, "data_dir": str(pgdata), **warm_status(pgdata)}


def status_lines(server: dict[str, Any] | None) -> list[str]:
    """``routegate data``'s lines about the embedded PostgreSQL."""
    if server is None:
        return ["the embedded PostgreSQL is not running"]
    lines = [
        f"the embedded PostgreSQL is running: pid {server['pid']}, socket {server['socket_dir']} port "
        f"{server['port']}, data {server['data_dir']}"
    ]
    if server["users"]:
        lines.append(f"  in use by pid {', '.join(str(pid) for pid in server['users'])}")
    if server["watcher_pid"] is not None:
        left = max(0, round(server["idle_seconds_left"]))
        lines.append(
            f"  kept warm by pid {server['watcher_pid']}: stops after {left} s more idle "
            f"(ROUTEGATE_DB_KEEP_WARM_SECONDS={server['keep_warm_seconds']:g}); `routegate data stop` stops it now"
        )
    else:
        lines.append("  stops when the last command using it exits")
    return lines


def run_stop(args: argparse.Namespace) -> int:
    """stop the embedded PostgreSQL now (it is otherwise kept running between commands for a while)

    Stop the embedded PostgreSQL of the data dir, which commands keep running for ROUTEGATE_DB_KEEP_WARM_SECONDS
    (default 300) after the last one left, so that the next command need not start it. Refuses while a command
    (`routegate up`, `serve`, `chat`) still uses it: stop that first.
    """
    from routegate.apps.support.warm import stop_server

    pgdata = embedded_data_dir(Settings())
    outcome = stop_server(pgdata)
    if outcome.pid is None:
        print(f"the embedded PostgreSQL in {pgdata} is not running")
        return 0
    if not outcome.stopped:
        users = ", ".join(str(pid) for pid in outcome.users) or "another process"
        raise ConfigurationError(
            f"the embedded PostgreSQL in {pgdata} (pid {outcome.pid}) is in use by pid {users}: stop what uses it "
            "(`routegate up`, `serve`, `chat`) and run `routegate data stop` again"
        )
    print(f"stopped the embedded PostgreSQL in {pgdata} (pid {outcome.pid})")
    return 0


def run_reset(args: argparse.Namespace) -> int:
    """remove the data dir (conversations, embedded PostgreSQL, router cache) after a confirmation

    Remove the whole data dir. Asks first (at a terminal) unless --yes; stops the embedded PostgreSQL when it is
    only kept warm between commands; refuses while a command uses it (stop `routegate up` / `serve` / `chat` first).
    """
    where = Settings().data_dir
    if not where.exists():
        print(f"nothing to remove: {where} does not exist")
        return 0
    if not where.is_dir():
        raise ConfigurationError(f"{where} is not a directory; check ROUTEGATE_DATA_DIR")
    pgdata = where / "support-pg"
    running = server_status(pgdata)
    if running is not None and running["users"]:
        raise ConfigurationError(
            f"the embedded PostgreSQL in {where} is running (pid {running['pid']}) for pid "
            f"{', '.join(str(pid) for pid in running['users'])}: stop what uses it (`routegate up`, `serve`, `chat`) "
            "and run `routegate data reset` again"
        )
    foreign = [e.name for e in sorted(where.iterdir()) if not e.name.startswith(tuple(p for p, _ in _PARTS))]
    if foreign:  # ROUTEGATE_DATA_DIR=$HOME by mistake must not cost the home directory
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ConfigurationError(
            f"{where} holds files routegate did not write ({shown}): nothing removed; check ROUTEGATE_DATA_DIR, "
            "or move those files away first if the directory is really routegate's"
        )
    size = human(_size(where))
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigurationError(
                f"removing {where} ({size}) needs a confirmation: pass --yes (standard input is not a terminal)"
            )
        answer = input(f"remove {where} ({size}: conversations, embedded PostgreSQL, router cache)? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return 1
    if running is not None:  # kept warm, used by no command: stopped first
        from routegate.apps.support.warm import stop_server

        if not stop_server(pgdata).stopped:
            raise ConfigurationError(
                f"the embedded PostgreSQL in {where} could not be stopped (a command started using it meanwhile): "
                "nothing removed; run `routegate data reset` again"
            )
    shutil.rmtree(where)
    print(f"removed {where} ({size})")
    return 0
