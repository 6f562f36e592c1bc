"""The UI's HTTP client for the routegate server: ``POST /chat`` as a stream of decoded SSE events, history,
reset, health and the desk's plan. Synchronous (Streamlit scripts are), one :class:`httpx.Client` per :class:`ChatClient`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx


class ChatClientError(Exception):
    """The server answered with an error (``status`` 0: it could not be reached); ``message`` says why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ServerEvent:
    event: str  # route | tool | token | final | error
    data: dict[str, Any]


def iter_sse(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """Decode ``text/event-stream`` lines into events (JSON ``data``; comments and ``id``/``retry`` skipped)."""
    name, data = "message", list[str]()
    for line in lines:
        if line == "":
            if data:
                yield ServerEvent(name, _json_object("\n".join(data)))
            name, data = "message", list[str]()
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
    if data:
        yield ServerEvent(name, _json_object("\n".join(data)))


def _json_object(raw: str) -> dict[str, Any]:
    value = json.loads(raw)
    return value if isinstance(value, dict) else {"value": value}


def _error_from(response: httpx.Response) -> ChatClientError:
    try:
        error = response.json()["error"]
        return ChatClientError(response.status_code, str(error["code"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        return ChatClientError(
            response.status_code, "http_error", f"HTTP {response.status_code}: {response.text[:200]}"
        )


class ChatClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 120.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        # Idle connections are dropped before the server's keep-alive timeout (5 s by default) can close one
        # under a request being sent.
        limits = httpx.Limits(keepalive_expiry=2.0)
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, limits=limits)

    def stream(self, message: str, *, session_id: str) -> Iterator[ServerEvent]:
        """The turn's events as they arrive; raises :class:`ChatClientError` before the first one on a 4xx/5xx."""
        try:
            with self._http.stream(
                "POST",
                "/chat",
                json={"message": message, "session_id": session_id},
                headers={"Accept": "text/event-stream"},
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise _error_from(response)
                yield from iter_sse(response.iter_lines())
        except httpx.TransportError as exc:
            raise ChatClientError(0, "unreachable", f"the server at {self.base_url} cannot be reached ({exc})") from exc

    def history(self, session_id: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self._call("GET", f"/sessions/{session_id}").json()["messages"]
        return messages

    def reset(self, session_id: str) -> None:
        self._call("DELETE", f"/sessions/{session_id}")

    def plan(self) -> dict[str, Any] | None:
        """The desk's plan as a diagram's data (``GET /plan``), or ``None`` when the desk has none or the server
        cannot say (the page then draws no plan)."""
        try:
            response = self._http.get("/plan")
        except httpx.TransportError:
            return None
        if response.status_code != 200:
            return None
        try:
            body = response.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def health(self) -> dict[str, Any]:
        try:
            response = self._http.get("/healthz")
        except httpx.TransportError as exc:
            return {"status": "unreachable", "database": "unknown", "detail": str(exc)}
        body: dict[str, Any] = response.json()
        return body

    def _call(self, method: str, path: str) -> httpx.Response:
        try:
            response = self._http.request(method, path)
        except httpx.TransportError as exc:
            raise ChatClientError(0, "unreachable", f"the server at {self.base_url} cannot be reached ({exc})") from exc
        if response.status_code >= 400:
            raise _error_from(response)
        return response

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
