"""The HTTP service around the support desk: ``create_app(desk=..., settings=...)``."""

from routegate.server._errors import ApiError
from routegate.server._metrics import ServerMetrics
from routegate.server.app import create_app

__all__ = ["ApiError", "ServerMetrics", "create_app"]
