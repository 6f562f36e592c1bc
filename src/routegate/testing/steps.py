"""The script of :class:`~routegate.testing.ScriptedOpenAIServer`: what it answers, and what it was asked."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "not_found_error",
    408: "timeout",
    409: "conflict",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_ERROR_MESSAGES: dict[int, str] = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to sample from this model.",
    404: "The model does not exist.",
    429: "Rate limit reached for requests.",
}


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer a chat completion with ``content`` (``None``: a message without content).

    Streamed requests (``stream: true``) get it as SSE chunks: ``chunks`` when given, else word by word.
    """

    content: str | None = ""
    finish_reason: str = "stop"
    chunks: tuple[str, ...] | None = None

    @property
    def text(self) -> str | None:
        """The whole content (``chunks`` joined when only they were given)."""
        if self.chunks is not None and not self.content:
            return "".join(self.chunks)
        return self.content

    def pieces(self) -> tuple[str, ...]:
        if self.chunks is not None:
            return self.chunks
        words = (self.content or "").split(" ")
        pieces = [word + " " for word in words[:-1]] + [words[-1]]
        return tuple(piece for piece in pieces if piece)


@dataclass(frozen=True, slots=True)
class ToolCallReply:
    """Answer a chat completion with tool calls: ``calls`` are ``(name, arguments)`` pairs, the arguments a dict
    (sent as its JSON) or the exact text (a model may write anything there); ``content`` goes beside them.

    Streamed requests get each call as the OpenAI API streams it: a first delta with the call's index, id, type and
    name, then its arguments in pieces of ``piece_chars`` characters; the finish reason comes last."""

    calls: tuple[tuple[str, Mapping[str, Any] | str], ...]
    content: str | None = None
    finish_reason: str = "tool_calls"
    piece_chars: int = 8

    def arguments(self) -> list[tuple[str, str]]:
        """``(name, arguments text)`` of each call."""
        return [(name, args if isinstance(args, str) else json.dumps(args)) for name, args in self.calls]


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """Answer with HTTP ``status`` and an OpenAI-style error body ``{"error": {message, type, param, code}}``.

    ``retry_after_ms`` is sent as the ``retry-after-ms`` header, so a client that retries 429 / 5xx (the openai
    SDK does) waits that long instead of its default backoff; ``None`` leaves the header out.
    """

    status: int
    message: str = ""
    type: str | None = None
    code: str | None = None
    retry_after_ms: float | None = 1.0
    headers: Mapping[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        kind = self.type or _ERROR_TYPES.get(self.status, "server_error" if self.status >= 500 else "api_error")
        message = self.message or _ERROR_MESSAGES.get(self.status, f"Scripted error {self.status}.")
        return {"error": {"message": message, "type": kind, "param": None, "code": self.code}}


@dataclass(frozen=True, slots=True)
class Hang:
    """Never answer: the request waits until the server closes (the client gives up on its own timeout)."""


@dataclass(frozen=True, slots=True)
class RawReply:
    """Answer with exactly these bytes (for answers no OpenAI server would send)."""

    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EmbeddingReply:
    """Answer ``POST /v1/embeddings``: ``vectors`` (one per input), or deterministic unit vectors derived from
    each input's hash with the request's ``dimensions`` (default ``dimensions`` here)."""

    vectors: tuple[tuple[float, ...], ...] | None = None
    dimensions: int = 8


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received, for assertions on what the client sent."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    raw_body: bytes = b""

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return model if isinstance(model, str) else None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def json_mode(self) -> bool:
        fmt = self.body.get("response_format") if isinstance(self.body, dict) else None
        return isinstance(fmt, dict) and fmt.get("type") == "json_object"

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The function tools offered (their ``function`` objects: name, description, parameters)."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        if not isinstance(tools, list):
            return []
        return [t["function"] for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)]

    @property
    def tool_names(self) -> list[str]:
        return [str(tool.get("name")) for tool in self.tools]

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The ``response_format``'s ``json_schema`` object (name, schema, strict) when one was asked for."""
        fmt = self.body.get("response_format") if isinstance(self.body, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict):
            return dict(fmt["json_schema"])
        return None

    @property
    def output_mode(self) -> str:
        """What the request asks for: ``"tools"``, ``"json_schema"``, ``"json"`` (a JSON object) or ``"text"``."""
        if self.tools:
            return "tools"
        if self.json_schema is not None:
            return "json_schema"
        return "json" if self.json_mode else "text"

    def content(self, role: str) -> str | None:
        """The text of the last message with ``role``."""
        for message in reversed(self.messages):
            if message.get("role") == role and isinstance(message.get("content"), str):
                return str(message["content"])
        return None

    @property
    def system_prompt(self) -> str | None:
        return self.content("system")

    def user_json(self) -> Any:
        """The last user message parsed as JSON (the routers and finalizers send JSON payloads)."""
        text = self.content("user")
        if text is None:
            raise AssertionError(f"request to {self.path} has no user message")
        return json.loads(text)


ServerStep: TypeAlias = Reply | ToolCallReply | ErrorReply | Hang | RawReply | EmbeddingReply
"""One scripted answer of :class:`~routegate.testing.ScriptedOpenAIServer` (as ``ChatStep`` is one of the
scripted chat model's and ``RouteStep`` one of the scripted router's)."""
Responder: TypeAlias = Callable[[RecordedRequest], ServerStep]
"""A step decided from the request itself (like a function model): gets the request, returns the step."""
ScriptItem: TypeAlias = ServerStep | Responder
