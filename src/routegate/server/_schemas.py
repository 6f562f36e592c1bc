"""Request and response bodies (pydantic: this is where untrusted data enters)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from routegate.server._text import CheckedBody

SESSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
SessionId = Annotated[str, StringConstraints(pattern=SESSION_PATTERN)]


class ChatRequest(CheckedBody):
    """``POST /chat``: one user message, in a session (a new one is created when ``session_id`` is omitted)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    message: str = Field(
        description="the user's message; not empty, at most `max_message_chars` characters (ROUTEGATE_MAX_MESSAGE_CHARS)"
    )
    session_id: SessionId | None = Field(
        default=None, description="conversation id (letters, digits, `._:@-`, up to 128 chars); omitted = new"
    )


class RouteInfo(BaseModel):
    route: str
    layer: str
    scores: dict[str, float]
    why: str


class ToolInfo(BaseModel):
    tool: str
    call: dict[str, Any]
    summary: str
    ok: bool
    evidence: Any = None


class ChatResponse(BaseModel):
    """``POST /chat`` with ``Accept: application/json``: the whole turn in one body."""

    session_id: str
    route: str
    answer: str
    stop_reason: str
    fallback: str | None
    trace: list[dict[str, Any]]
    latency_ms: float
    decision: RouteInfo | None
    tools: list[ToolInfo]


class MessageOut(BaseModel):
    role: Literal["user", "assistant"]
    content: str
    created_at: float


class SessionOut(BaseModel):
    session_id: str
    messages: list[MessageOut]


class Health(BaseModel):
    status: Literal["ok", "degraded", "unavailable"]
    database: Literal["ok", "unavailable"]
    detail: str = ""
    # the chat model: ok, degraded, down (turns are answered offline), off (none configured); absent when the desk
    # cannot tell
    model: Literal["ok", "degraded", "down", "off"] | None = None


# --- OpenAI-compatible ------------------------------------------------------------------------------------


class OpenAIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer", "function"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = [str(p.get("text", "")) for p in self.content if p.get("type") == "text"]
        return "".join(parts)


class ChatCompletionRequest(CheckedBody):
    """The subset of OpenAI's body that matters here; other fields (temperature, ...) are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=256)
    messages: list[OpenAIMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    user: SessionId | None = Field(default=None, description="used as the session id when given")
