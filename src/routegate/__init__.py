"""routegate: governed routing of requests to specialised executors."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("routegate")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
