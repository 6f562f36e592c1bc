"""A loopback HTTP server that floods (or drips) one answer and counts what the kernel took from it: what a client
that reads an untrusted answer could have received before it stopped reading, measured on the server's side."""

from __future__ import annotations

import socket
import threading
from pathlib import Path


class FloodServer:
    """A loopback server whose every answer is ``body_bytes`` long, streamed in small chunks without a length; it
    counts the bytes the kernel accepted from it before the client closed (what the client could have read: its
    receive buffer and this socket's send buffer, both bounded by the kernel, are the only slack)."""

    CHUNK = 16 * 1024
    SEND_BUFFER = 64 * 1024

    def __init__(
        self,
        body_bytes: int,
        *,
        drip: float = 0.0,
        headers: str = "",
        chunk: bytes = b"",
        content_type: str = "text/plain",
    ) -> None:
        self.body_bytes, self.drip, self.content_type = body_bytes, drip, content_type
        self.headers = headers
        self.chunk = chunk or b"x" * (1 if drip else self.CHUNK)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.sent: list[int] = []
        self.done = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.SEND_BUFFER)
        sent = 0
        try:
            conn.recv(65536)
            conn.sendall(
                f"HTTP/1.1 200 OK\r\ncontent-type: {self.content_type}\r\n{self.headers}connection: close\r\n\r\n".encode()
            )
            while sent < self.body_bytes and not self.stop.is_set():
                conn.sendall(self.chunk)
                sent += len(self.chunk)
                if self.drip:
                    self.stop.wait(self.drip)  # the server's pace, not the test's synchronisation
        except OSError:
            pass  # the client closed: what it did not read was never sent
        finally:
            self.sent.append(sent)
            conn.close()
            self.done.set()

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(timeout=30)


def kernel_slack() -> int:
    """The most a client that stopped reading can leave unread in flight: its receive buffer's ceiling plus the
    server socket's send buffer (the kernel doubles SO_SNDBUF)."""
    receive_max = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    return receive_max + 2 * FloodServer.SEND_BUFFER
