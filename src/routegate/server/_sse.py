"""Server-Sent Events: the wire encoding and a streaming response that notices a client leaving while the
desk is still thinking, and always closes its event source (so no task or connection outlives the client). A
stream may name its *farewell*, the last event it sends if the server stops under it (:mod:`._shutdown`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio

from routegate._extras import needs

with needs("server"):
    from starlette.responses import StreamingResponse
    from starlette.types import Receive, Scope, Send

from routegate.server._shutdown import set_farewell

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def encode_event(event: str, payload: Any) -> bytes:
    """``event: <name>\\ndata: <one-line JSON>\\n\\n`` (JSON never contains a raw newline)."""
    return f"event: {event}\ndata: {dumps(payload)}\n\n".encode("utf-8", "replace")


def encode_data(data: str) -> bytes:
    """An unnamed event (``data: ...``), as OpenAI's streaming format uses."""
    return f"data: {data}\n\n".encode("utf-8", "replace")


class EventStreamResponse(StreamingResponse):
    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        status_code: int = 200,
        headers: dict[str, str] | None = None,
        farewell: bytes | None = None,
    ) -> None:
        super().__init__(content, status_code=status_code, headers={**SSE_HEADERS, **(headers or {})})
        self.farewell = farewell

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.farewell is not None:  # the last event if the server stops under the stream
            set_farewell(scope, self.farewell)
        try:
            async with anyio.create_task_group() as group:

                async def stream() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                async def watch() -> None:
                    await self.listen_for_disconnect(receive)
                    group.cancel_scope.cancel()

                group.start_soon(stream)
                group.start_soon(watch)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
