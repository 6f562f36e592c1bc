"""The support desk's public contract, shared by the agent (``routegate.apps.support``), the HTTP server
(``routegate.server``) and the UI. Events arrive in this order for one turn:
``route`` → ``tool`` (absent on the LLM route) → ``token``* → ``final``; or ``error`` instead of ``final``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from routegate.core._fields import fields_dict
from routegate.core.context import new_run_id
from routegate.core.outcome import Outcome
from routegate.core.stop_reasons import SUCCESS, Phase

LLM_UNAVAILABLE = "llm_unavailable"
"""A turn's ``fallback`` when the chat model failed (unreachable, timeout, auth, 5xx, a refused or unusable answer)
and the offline path answered instead: the answer is the one the desk gives with no model configured."""
ENCODER_UNAVAILABLE = "encoder_unavailable"
"""A turn's ``fallback`` when the embedding layer failed (its encoder) and the rules alone routed the message: no
rule matched, so it went to the LLM route."""
UNANSWERED_FALLBACKS = ("tool_error", "sql_refused", "llm_failed")
"""Fallback families whose answer only says that the question could not be answered: such a turn's stop reason
is ``unanswered:<fallback>`` (e.g. ``unanswered:tool_error:database_error``), never ``success``."""


def unanswered(fallback: str) -> str:
    """The stop reason of a turn that ended without an answer because of ``fallback``."""
    return f"unanswered:{fallback}"


SupportRoute = Literal["POSTGRES", "VECTOR", "EXTERNAL", "LLM"]
ROUTES: tuple[SupportRoute, ...] = ("POSTGRES", "VECTOR", "EXTERNAL", "LLM")
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    created_at: float = 0.0
    # what the turn established (an assistant message's, as stored: :class:`.followup.TurnContext`); not compared
    context: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class RouteChosen:
    route: SupportRoute
    layer: str  # which router layer decided: "rules", "semantic", "llm", "clarify", "default", "unsure", ...
    scores: Mapping[str, float] = field(default_factory=dict)
    why: str = ""
    type: Literal["route"] = "route"


@dataclass(frozen=True, slots=True)
class ToolUsed:
    tool: str  # "postgres" | "vector" | "external"
    call: Mapping[str, Any]  # the tool input (e.g. {"query": ..., "params": ...})
    summary: str  # short evidence summary, e.g. "2 rows" or "1 document (score 0.71)"
    ok: bool
    evidence: Any = None
    type: Literal["tool"] = "tool"


@dataclass(frozen=True, slots=True)
class AnswerToken:
    text: str
    type: Literal["token"] = "token"


_NOT_ON_THE_WIRE = frozenset({"type", "phase", "message", "run_id"})


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended, and the turn's last event (``final``).

    It reads like every run's :class:`~routegate.core.RunResult`: ``outcome`` (and ``ok``, ``stop_reason``,
    ``phase``, ``message``), ``output`` (the answer), ``run_id``, ``elapsed_ms``. Its JSON form
    (:meth:`to_dict`, what the HTTP API sends) is the desk's wire format: ``latency_ms`` there, no ``run_id``.
    ``trace`` is that wire form's list of dicts.
    """

    session_id: str
    route: SupportRoute
    answer: str
    stop_reason: str
    fallback: str | None  # why the answer fell back to the LLM/Respond node, None if it did not
    trace: tuple[Mapping[str, Any], ...]
    latency_ms: float
    type: Literal["final"] = "final"
    phase: Phase | None = None  # where a stopped turn stopped (None on success)
    message: str = ""  # why it stopped, for people (empty on success)
    run_id: str = field(default_factory=new_run_id, compare=False)  # the turn's id (not in the JSON form)

    @property
    def ok(self) -> bool:
        """Whether the turn answered (its stop reason is ``"success"``)."""
        return self.stop_reason == SUCCESS

    @property
    def outcome(self) -> Outcome:
        """How the turn ended, in the form every runtime's result shares."""
        return Outcome.stopped(self.stop_reason, self.phase, self.message)

    @property
    def output(self) -> str:
        """The answer (every run's result calls it ``output``)."""
        return self.answer

    @property
    def elapsed_ms(self) -> float:
        """How long the turn took: ``latency_ms``, under the name every run's result uses."""
        return self.latency_ms

    def to_dict(self) -> dict[str, Any]:
        """The turn's answer on the wire: its fields but the event ``type`` and how a stopped turn stopped."""
        answer = fields_dict(self, leave_out=_NOT_ON_THE_WIRE)
        return answer | {"trace": [dict(t) for t in self.trace], "latency_ms": round(self.latency_ms, 3)}


@dataclass(frozen=True, slots=True)
class TurnError:
    message: str
    code: str  # e.g. "database_unavailable"
    type: Literal["error"] = "error"


SupportEvent = RouteChosen | ToolUsed | AnswerToken | TurnResult | TurnError


@runtime_checkable
class SupportDesk(Protocol):
    """What the server and the CLI need from the support agent."""

    def iter(self, message: str, *, session_id: str) -> AsyncIterator[SupportEvent]: ...

    async def ask(self, message: str, *, session_id: str) -> TurnResult: ...

    async def history(self, session_id: str) -> list[Message]: ...

    async def reset(self, session_id: str) -> None: ...

    async def healthy(self) -> bool: ...


@runtime_checkable
class ReportsModelHealth(Protocol):
    """A desk that can tell its chat model's state (``ok``, ``degraded``, ``down``, or ``off``: none configured)."""

    def model_health(self) -> str: ...


@runtime_checkable
class SerialisesSessions(Protocol):
    """A desk whose own lock runs each session's turns one at a time (the support desk: a PostgreSQL advisory lock
    per session, so across every process over its database): its ``iter`` waits for the session's previous turn
    (and ends with an ``error`` event ``session_busy`` when that takes too long), its ``reset`` for the running
    turn. The server then adds no lock of its own; for any other desk it serialises a session's turns in process."""

    def serialises_sessions(self) -> bool:
        """Whether this desk serialises its sessions itself (a desk that forwards to another answers for it)."""
        ...

    def sessions_held(self) -> int:
        """How many sessions this process holds or waits for under the desk's lock."""
        ...
