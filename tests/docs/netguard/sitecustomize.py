"""Loaded by the interpreters that tests/docs starts (``PYTHONPATH`` points here): no network beyond loopback.

The same guard as the test suite's autouse fixture, for code that runs in a child process: a doc example that
reached out to the internet would pass here and fail for a reader offline, or leak a request in CI.
"""

from __future__ import annotations

import socket
from typing import Any

_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0.0.0.0")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = str(address[0])
        if not host.startswith(_LOOPBACK_PREFIXES):
            raise RuntimeError(f"doc examples may not open network connections outside loopback (tried {host})")
    return _real_connect(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]  # the guard is this patch
