"""The HTTP service around the support desk: ``create_app(desk=..., settings=...)``."""

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.server.app import create_app

__all__ = ["create_app"]

_MOVED = {"ApiError": "_errors", "ServerMetrics": "_metrics"}  # the app's own parts
__getattr__, __dir__ = _lazy_exports(__name__, {}, __all__, moved=_MOVED)
