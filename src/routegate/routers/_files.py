"""Reading a saved router's files: the one way in, so that a hostile directory can neither hang nor exhaust the loader.

Every file of a saved router (``manifest.json``, the char n-gram vocabulary, the ``.npy`` arrays, a fine-tuned
``encoder.onnx``) is opened by :func:`open_router_file`:

* its name is a plain file name inside the router directory (no ``/``, no ``..``); it is opened relative to the
  directory with ``O_NOFOLLOW``, so a symbolic link is refused wherever it points;
* it is opened with ``O_NONBLOCK`` and ``fstat``-ed: only a regular file is read (a FIFO, a device or a directory
  is refused without waiting on it);
* its size is checked against the cap of its kind before anything is read, and at most that size + 1 bytes are
  read (a file that grows meanwhile is refused too).

JSON is parsed with a nesting limit (:data:`JSON_MAX_DEPTH`); ``.npy`` arrays are read without pickle, and the shape
and dtype their header declares are checked against the bytes actually there before anything is allocated. Every
failure is a :class:`~routegate.errors.ConfigurationError` naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from routegate._extras import needs
from routegate.errors import ConfigurationError

with needs("embed"):
    import numpy as np

MiB = 1 << 20
MANIFEST_MAX_BYTES = 16 * MiB
"""``manifest.json``: routes, calibration, head parameters, the fine-tune's record (a few KB in practice)."""
VOCABULARY_MAX_BYTES = 64 * MiB
"""The char n-gram vocabulary (JSON; ~0.3 MB at the default 30,000 n-grams)."""
ARRAY_MAX_BYTES = 4096 * MiB
"""One ``.npy`` array (the example bank is the largest: examples x 384 float32, 1.5 KB an example)."""
MODEL_MAX_BYTES = 2048 * MiB
"""A fine-tuned ``encoder.onnx`` (59 MB for all-MiniLM-L6-v2; 2 GiB is ONNX's own protobuf limit)."""
JSON_MAX_DEPTH = 64
"""Deepest nesting of lists and objects accepted in a saved router's JSON (a manifest nests 5 levels)."""

_NPY_HEADER_WINDOW = 65536
_REMEDY = "save the router again (SemanticRouter.save / routegate fit)"
_LINK_REMEDY = "a saved router's files must be regular files in its directory — copy the file in instead of linking it"


def _inside(directory: Path, name: object, what: str) -> str:
    """``name`` when it is a plain file name in ``directory``; refused when it could point anywhere else."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"{directory / 'manifest.json'}: {what} has no file entry")
    if name in (".", "..") or "/" in name or "\\" in name or "\0" in name or os.sep in name:
        raise ConfigurationError(
            f"{directory / 'manifest.json'}: {what} points outside the router directory ({name!r}); "
            "a saved router names only files in its own directory"
        )
    return name


@contextlib.contextmanager
def open_router_file(
    directory: Path, name: object, max_bytes: int, *, what: str, remedy: str | None = None
) -> Iterator[tuple[int, int]]:
    """The open file ``directory/name`` (a descriptor) and its size, once it is known to be a regular file inside
    ``directory`` of at most ``max_bytes``; closed on exit. ``remedy``: what an error tells the reader to do (for a
    file that is not a saved router's; ``None``: save the router again)."""
    file_name = _inside(directory, name, what)
    file = directory / file_name
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ConfigurationError(f"no saved router at {directory}: {exc.strerror or exc}") from exc
    try:
        try:
            fd = os.open(file_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                link_remedy = _LINK_REMEDY if remedy is None else f"it is not followed; {remedy}"
                raise ConfigurationError(f"{file} ({what}) is a symbolic link; {link_remedy}") from exc
            raise ConfigurationError(
                f"cannot read {file} ({what}): {exc.strerror or exc}; {remedy or _REMEDY}"
            ) from exc
    finally:
        os.close(dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(
                f"{file} ({what}) is not a regular file (it is a {_kind(info.st_mode)}); {remedy or _REMEDY}"
            )
        if info.st_size > max_bytes:
            raise ConfigurationError(
                f"{file} ({what}) is {info.st_size} bytes, more than the {max_bytes} bytes allowed for this kind "
                f"of file; {remedy or _REMEDY}"
            )
        os.set_blocking(fd, True)
        yield fd, info.st_size
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "special file"


def check_router_file(directory: Path, name: object, max_bytes: int, *, what: str) -> Path:
    """``directory/name`` once it is known to be a regular file inside ``directory`` of at most ``max_bytes``
    (nothing is read): for files read later, which are read through :func:`read_router_file` then."""
    with open_router_file(directory, name, max_bytes, what=what):
        return directory / str(name)


def read_router_file(
    directory: Path, name: object, max_bytes: int, *, what: str, remedy: str | None = None
) -> memoryview:
    """The bytes of ``directory/name``: a regular file inside ``directory`` of at most ``max_bytes`` (see the module
    docstring); :class:`ConfigurationError` naming the file otherwise. Reads once, into one uninitialised buffer of
    the file's size plus one byte (to notice a file that grew since its size was taken)."""
    with open_router_file(directory, name, max_bytes, what=what, remedy=remedy) as (fd, size):
        view = np.empty(size + 1, dtype=np.uint8).data
        got = 0
        try:
            while got <= size:
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    break
                got += n
        except OSError as exc:
            raise ConfigurationError(f"cannot read {directory / str(name)} ({what}): {exc.strerror or exc}") from exc
    if got > size:
        raise ConfigurationError(f"{directory / str(name)} ({what}) grew while it was read; {remedy or _REMEDY}")
    return view[:got]


def read_router_json(directory: Path, name: object, max_bytes: int, *, what: str) -> Any:
    """The JSON value in ``directory/name`` (UTF-8, nested at most :data:`JSON_MAX_DEPTH` deep)."""
    data = read_router_file(directory, name, max_bytes, what=what)
    file = directory / str(name)
    try:
        text = str(data, "utf-8")
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{file} ({what}): not UTF-8 text (byte offset {exc.start}); {_REMEDY}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{file} ({what}): not valid JSON ({exc.msg}); {_REMEDY}") from exc
    except RecursionError as exc:
        raise ConfigurationError(
            f"{file} ({what}): nested deeper than the {JSON_MAX_DEPTH} levels a saved router's JSON may have; {_REMEDY}"
        ) from exc
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise ConfigurationError(f"{file} ({what}): not valid JSON ({exc}); {_REMEDY}") from exc
    brackets = text.count("[") + text.count("{")  # an upper bound of the depth: most files need no walk
    if brackets > JSON_MAX_DEPTH and _nested_deeper(value, JSON_MAX_DEPTH):
        raise ConfigurationError(
            f"{file} ({what}): nested deeper than the {JSON_MAX_DEPTH} levels a saved router's JSON may have; {_REMEDY}"
        )
    return value


def _nested_deeper(value: object, limit: int) -> bool:
    """Whether lists and objects nest more than ``limit`` levels in a parsed JSON value (iteratively: no recursion
    to exhaust)."""
    stack: list[tuple[object, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return False


def read_router_array(
    directory: Path,
    name: object,
    *,
    what: str,
    sha256: str | None = None,
    max_bytes: int = ARRAY_MAX_BYTES,
    remedy: str | None = None,
) -> np.ndarray[Any, Any]:
    """The numeric array in the ``.npy`` file ``directory/name``, read without pickle.

    The header's shape x dtype must account for exactly the bytes after it, so a forged header (a 1.4 TiB shape in a
    small file) is refused before anything is allocated; only plain bool, integer and float dtypes are accepted.
    ``sha256``: the file's digest as saved; a file whose bytes differ (changed or corrupted since) is refused.
    ``max_bytes``: the largest file read (a caller that knows the array's shape passes what it needs)."""
    data = read_router_file(directory, name, max_bytes, what=what, remedy=remedy)
    file = directory / str(name)
    stream = io.BytesIO(data[:_NPY_HEADER_WINDOW])  # the header: numpy reads at most 10,000 bytes of it
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except Exception as exc:  # numpy parses the header text with tokenize and ast: ValueError, SyntaxError,
        # tokenize.TokenError, RecursionError ... all mean the same here: not an array this loader reads
        raise ConfigurationError(f"{file} ({what}): not a .npy array ({exc}); {remedy or _REMEDY}") from exc
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise ConfigurationError(f"{file} ({what}): dtype {dtype} is not a plain number type; {remedy or _REMEDY}")
    if any(n < 0 for n in shape):
        raise ConfigurationError(f"{file} ({what}): negative dimension in shape {shape}; {remedy or _REMEDY}")
    count = math.prod(shape)
    offset = stream.tell()
    declared, held = count * dtype.itemsize, len(data) - offset
    if declared != held:
        raise ConfigurationError(
            f"{file} ({what}): its header declares shape {shape} of {dtype} ({declared} bytes) but {held} bytes "
            f"follow it — the file is truncated or forged; {remedy or _REMEDY}"
        )
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise ConfigurationError(
            f"{file} ({what}): its SHA-256 differs from the one the manifest recorded when it was saved — the file "
            f"was changed or corrupted since; {remedy or _REMEDY}"
        )
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C")  # a view of the bytes read: the file is read once
