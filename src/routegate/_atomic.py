"""A file written whole or not at all: the bytes go to a temporary file beside the target, which is then renamed into
place, so a concurrent reader finds the old file, the new one or none, never a part (the caches of the int8 model
and of a desk's example vectors write through here)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(target: Path, data: bytes | memoryview, *, scratch_prefix: str) -> None:
    """Write ``data`` to ``target``, creating its directory (mode 0700) when missing. The temporary file is named
    ``<scratch_prefix>…part`` in the same directory and removed when the write fails; :class:`OSError` when the
    directory or the file cannot be written."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(dir=target.parent, prefix=scratch_prefix, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(scratch, target)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
