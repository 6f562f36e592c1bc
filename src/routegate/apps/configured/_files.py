"""The files a desk reads: regular files only, their size checked before a byte is read (the paths of ``desk.toml``
are kept inside the desk directory by :func:`~.config.desk_path`).

* :func:`read_regular` — one file, opened without following a symbolic link (``O_NOFOLLOW``), refused unless it is
  a regular file and at most ``limit`` bytes (``fstat`` says so before anything is read; the read stops one byte
  past the limit, should the file grow meanwhile).
* :func:`regular_files` — a folder, walked without following links (``os.fwalk``, each file opened relative to its
  folder's descriptor, so that a folder swapped for a link meanwhile is not followed either): its regular files,
  and what it passed by (links, sockets, FIFOs) for the caller to say.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from routegate.apps.configured.config import DeskConfigError

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _read_open(fd: int, name: str, limit: int) -> bytes:
    """The bytes of the open file ``fd``, refused (unread) when it is not a regular file or over ``limit``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise DeskConfigError(f"{name} is not a regular file; give a file")
    if info.st_size > limit:
        raise DeskConfigError(f"{name} is {info.st_size} bytes, over the {limit}-byte limit; split it")
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise DeskConfigError(f"{name} grew past the {limit}-byte limit while it was read; split it")
    return b"".join(chunks)


def read_regular(path: Path, *, limit: int, dir_fd: int | None = None, shown: Path | None = None) -> bytes:
    """The bytes of ``path`` (relative to ``dir_fd`` when given; ``shown`` in messages), a regular file of at most
    ``limit`` bytes, read without following a symbolic link. ``OSError`` when it cannot be opened (``ELOOP``: it is
    a link); :class:`DeskConfigError` when it is not a regular file or too big."""
    fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    try:
        return _read_open(fd, str(shown or path), limit)
    finally:
        os.close(fd)


@dataclass(slots=True)
class Folder:
    """What :func:`regular_files` found: ``files`` (path relative to the folder, bytes), sorted by path, and
    ``skipped`` (path relative to the folder, why)."""

    files: list[tuple[PurePosixPath, bytes]] = field(default_factory=list)
    skipped: list[tuple[PurePosixPath, str]] = field(default_factory=list)


def _not_hidden(name: str) -> bool:
    return not name.startswith(".")


def regular_files(root: Path, *, wanted: Callable[[str], bool], limit: int) -> Folder:
    """The regular files under the folder ``root`` whose name is ``wanted`` (hidden files and folders left out),
    read; symbolic links and other special files are passed by, not followed, and listed in ``skipped``."""
    found = Folder()
    for folder, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        relative = PurePosixPath(Path(folder).relative_to(root).as_posix())
        # fwalk lists a link to a folder with the folders (and does not enter it): passed by, and said
        links = [d for d in dirnames if stat.S_ISLNK(os.stat(d, dir_fd=dir_fd, follow_symlinks=False).st_mode)]
        dirnames[:] = sorted(d for d in dirnames if _not_hidden(d) and d not in links)
        for name in sorted(filter(_not_hidden, [*filenames, *links])):
            path = relative / name
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                found.skipped.append((path, "a symbolic link: the desk reads only regular files"))
            elif not wanted(name):
                continue
            elif not stat.S_ISREG(mode):
                found.skipped.append((path, "not a regular file"))
            else:
                found.files.append((path, read_regular(Path(name), limit=limit, dir_fd=dir_fd, shown=root / path)))
    found.files.sort(key=lambda item: item[0].parts)
    found.skipped.sort(key=lambda item: item[0].parts)
    return found
