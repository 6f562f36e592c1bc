"""``__version__``: the installed distribution's version, read from its metadata on first import (never written
down a second time). ``routegate.__version__`` and the tracer's instrumentation version are this one value."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("routegate")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"
