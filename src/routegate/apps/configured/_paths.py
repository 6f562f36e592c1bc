"""Where a path of ``desk.toml`` may lead: into the desk directory, through no symbolic link.

A desk directory may come from someone else; its ``desk.toml`` names the files the desk reads (``database.sql_file``,
``knowledge.paths``) and quotes to whoever chats with it. :func:`inside` keeps those names relative to the desk
directory and in it: an absolute path, ``~`` or a ``..`` is refused, and so is a symbolic link anywhere on the way
(a link could point anywhere on the machine). ``config.desk_path`` turns a refusal into the configuration's error.
"""

from __future__ import annotations

import stat
from pathlib import Path


class OutsideError(ValueError):
    """A path of ``desk.toml`` that leaves the desk directory or passes through a symbolic link."""


def inside(desk_dir: Path, entry: str) -> Path:
    """``entry`` as a path in ``desk_dir``; :class:`OutsideError` (what is wrong, what to do) when it is absolute,
    starts with ``~``, has a ``..`` or passes through a symbolic link. A missing path is returned as it is (the
    caller says it does not exist)."""
    given = Path(entry)
    if entry.startswith("~") or given.is_absolute() or given.drive:
        raise OutsideError("is not relative to the desk directory: a desk reads only the files in its directory")
    if ".." in given.parts:
        raise OutsideError("leaves the desk directory (..): a desk reads only the files in its directory")
    here = desk_dir
    for part in given.parts:
        here = here / part
        try:
            mode = here.lstat().st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode):
            raise OutsideError(
                f"passes through the symbolic link {here}: a desk reads only the regular files in its directory; "
                "copy the file in"
            )
    return desk_dir.joinpath(*given.parts)
