"""``routegate data`` / ``routegate data reset``: where routegate keeps its data on this machine, and removing it.

The data dir is ``ROUTEGATE_DATA_DIR``, by default the platform's user data directory (``platformdirs``:
``~/.local/share/routegate`` on Linux). It holds the embedded PostgreSQL (``support-pg``: conversations and the
desk's articles) and the support router fitted on first use (``support-router-<key>``), which is fitted again
when missing. ``reset`` removes the whole directory, after a confirmation (``--yes`` skips it); it refuses while
the embedded PostgreSQL in it runs (a ``routegate up`` / ``serve`` / ``chat`` is using it), and when the directory
holds anything else (``ROUTEGATE_DATA_DIR`` pointing at the wrong place).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from routegate.cli._command import add_command
from routegate.errors import ConfigurationError
from routegate.settings import Settings

_PARTS = (
    ("support-pg", "the embedded PostgreSQL: conversations and the support desk's articles"),
    ("support-router-", "the support router fitted on first use (fitted again when missing)"),
)


def register(subparsers: Any) -> None:
    data = add_command(subparsers, "data", run_show)
    data.add_argument("--json", action="store_true", help="print one JSON object")
    actions = data.add_subparsers(title="data commands", metavar="ACTION")
    reset = add_command(actions, "reset", run_reset)
    reset.add_argument("--yes", action="store_true", help="do not ask for confirmation")


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


def run_show(args: argparse.Namespace) -> int:
    """show where routegate keeps its data (embedded PostgreSQL, router cache) and its size; reset it

    Show the data dir (ROUTEGATE_DATA_DIR, by default the platform's user data directory,
    ~/.local/share/routegate on Linux) and the size of each part: the embedded PostgreSQL (conversations,
    articles) and the support router fitted on first use. `routegate data reset` removes it all.
    """
    settings = Settings()
    where = settings.data_dir
    parts = _parts(where)
    total = sum(part["bytes"] for part in parts)
    running = _server_running(where)
    if args.json:
        out = {"data_dir": str(where), "exists": where.is_dir(), "bytes": total, "parts": parts}
        print(json.dumps({**out, "postgres_running_pid": running, "database_url_set": bool(settings.database_url)}))
        return 0
    print(f"data dir: {where}  (ROUTEGATE_DATA_DIR to change it)")
    if not where.is_dir():
        print("  (does not exist yet: the first command that needs it creates it)")
        return 0
    for part in parts:
        print(f"  {human(part['bytes']):>9}  {part['name']}  — {part['what']}")
    print(f"  {human(total):>9}  in all")
    if running is not None:
        print(f"the embedded PostgreSQL is running (pid {running})")
    if settings.database_url:
        print("DATABASE_URL is set: the support desk uses that server; its data is not in this directory")
    print("`routegate data reset` removes it all (conversations included)")
    return 0


def _server_running(where: Path) -> int | None:
    """The PID of the embedded PostgreSQL running on ``where``, from its ``postmaster.pid``, if it is alive."""
    from routegate.apps.support.embedded import process_alive

    try:
        first = (where / "support-pg" / "postmaster.pid").read_text().split(maxsplit=1)[0]
        pid = int(first)
    except (OSError, ValueError, IndexError):
        return None
    return pid if process_alive(pid) else None


def run_reset(args: argparse.Namespace) -> int:
    """remove the data dir (conversations, embedded PostgreSQL, router cache) after a confirmation

    Remove the whole data dir. Asks first (at a terminal) unless --yes; refuses while the embedded PostgreSQL in
    it runs (stop `routegate up` / `serve` / `chat` first).
    """
    where = Settings().data_dir
    if not where.exists():
        print(f"nothing to remove: {where} does not exist")
        return 0
    if not where.is_dir():
        raise ConfigurationError(f"{where} is not a directory; check ROUTEGATE_DATA_DIR")
    running = _server_running(where)
    if running is not None:
        raise ConfigurationError(
            f"the embedded PostgreSQL in {where} is running (pid {running}): stop what uses it (`routegate up`, "
            "`serve`, `chat`) and run `routegate data reset` again"
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
    shutil.rmtree(where)
    print(f"removed {where} ({size})")
    return 0
