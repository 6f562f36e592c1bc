"""The support desk's public contract, shared by the agent (``routegate.apps.support``), the HTTP server
(``routegate.server``) and the UI. Events arrive in this order for one turn:
``route`` → ``tool`` (absent on the LLM route) → ``token``* → ``final``; or ``error`` instead of ``final``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from routegate.core.contracts import TraceEntry
from routegate.core.events import FinalEvent
from routegate.core.outcome import Outcome
from routegate.core.result import RunResult
from routegate.core.stop_reasons import Phase

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


class TurnResult(RunResult[str]):
    """How a turn ended: the desk's :class:`~routegate.core.RunResult`, whose ``output`` is the answer. The turn's
    stream ends with a :class:`~routegate.core.FinalEvent` carrying it, like every runtime's.

    As every run's result: ``outcome`` (the one stop value; ``ok``, ``stop_reason``, ``phase``, ``message`` and
    ``status`` read it), ``output``, ``trace`` (the plan's :class:`~routegate.core.TraceEntry` per step), ``run_id``,
    ``elapsed_ms``. The desk adds only its own facts: ``session_id``, ``route``, ``fallback`` (why the answer fell
    back to the LLM/Respond node, ``None`` if it did not) and ``notes``, the turn's record as the desk's JSON form
    shows it, one mapping per entry (``{"node": "router", ...}``, ``{"node": "plan", ...}`` — the plan's
    ``TraceEntry`` of each step —, ``{"node": "gateway", ...}``, the tool's call, the Respond mode): its entries carry
    fields no ``TraceEntry`` has (the router's scores, the SQL that ran, its rows). ``answer`` and ``latency_ms``
    read ``output`` and ``elapsed_ms`` under the names the JSON form uses.

    :meth:`to_dict` is the desk's wire format, a serializer of this result (the HTTP API's ``final`` event,
    ``ask --json``): ``session_id``, ``route``, ``answer``, ``stop_reason``, ``fallback``, ``trace`` (the notes),
    ``latency_ms``; no ``run_id``, ``phase`` or ``message``.

    Made with the desk's words (``TurnResult(session_id, route, answer, stop_reason, fallback, notes, latency_ms,
    phase=, message=, run_id=, trace=)``). ``trace=`` given the desk's mappings (the form before ``notes``
    existed) is read as ``notes`` for one more release, with a warning.
    """

    __slots__ = ("fallback", "notes", "route", "session_id")

    def __init__(
        self,
        session_id: str,
        route: SupportRoute,
        answer: str,
        stop_reason: str,
        fallback: str | None,
        notes: Sequence[Mapping[str, Any]] = (),
        latency_ms: float = 0.0,
        *,
        phase: Phase | None = None,
        message: str = "",
        run_id: str | None = None,
        trace: Sequence[TraceEntry] | Sequence[Mapping[str, Any]] = (),
    ) -> None:
        entries: tuple[TraceEntry, ...] = ()
        if trace and not all(isinstance(entry, TraceEntry) for entry in trace):
            warnings.warn(
                "TurnResult(trace=<the desk's mappings>) is deprecated: pass them as notes=; trace= is the run's "
                "TraceEntry tuple, as every RunResult's. The old form goes in the next release.",
                DeprecationWarning,
                stacklevel=2,
            )
            notes = tuple(dict(entry) for entry in trace if isinstance(entry, Mapping))
        else:
            entries = tuple(entry for entry in trace if isinstance(entry, TraceEntry))
        super().__init__(Outcome.stopped(stop_reason, phase, message), answer, entries, run_id, latency_ms)
        self.session_id = session_id
        self.route = route
        self.fallback = fallback
        self.notes: tuple[Mapping[str, Any], ...] = tuple(notes)

    @property
    def answer(self) -> str:
        """The answer: :attr:`output` under the name the desk's JSON form uses."""
        return self.output

    @property
    def latency_ms(self) -> float:
        """How long the turn took: :attr:`elapsed_ms` under the name the desk's JSON form uses."""
        return self.elapsed_ms

    def in_session(self, session_id: str) -> TurnResult:
        """This result as the turn of ``session_id`` (the server names the client's session, not the desk's)."""
        return TurnResult(
            session_id,
            self.route,
            self.output,
            self.stop_reason,
            self.fallback,
            self.notes,
            self.elapsed_ms,
            phase=self.phase,
            message=self.message,
            run_id=self.run_id,
            trace=self.trace,
        )

    def to_dict(self) -> dict[str, Any]:
        """The turn on the wire (the HTTP API's ``final`` event, ``ask --json``)."""
        return {
            "session_id": self.session_id,
            "route": self.route,
            "answer": self.output,
            "stop_reason": self.outcome.stop_reason,
            "fallback": self.fallback,
            "trace": [dict(note) for note in self.notes],
            "latency_ms": round(self.elapsed_ms, 3),
        }

    def __repr__(self) -> str:
        return f"TurnResult(route={self.route!r}, stop_reason={self.stop_reason!r}, output={self.output!r})"


@dataclass(frozen=True, slots=True)
class TurnError:
    message: str
    code: str  # e.g. "database_unavailable"
    type: Literal["error"] = "error"


SupportEvent = RouteChosen | ToolUsed | AnswerToken | FinalEvent[TurnResult] | TurnError
"""One event of a turn's stream; the last is a :class:`~routegate.core.FinalEvent` carrying the turn's
:class:`TurnResult`, or a :class:`TurnError`."""


@runtime_checkable
class SupportDesk(Protocol):
    """What the server and the CLI need from the support agent. ``tenant`` names whose request it is (the server's
    API key; ``""`` for the anonymous caller): a desk whose resources are shared between tenants (the support
    desk's database pool) serves them in turn. A desk written before the parameter existed is still served, for one
    release, without it (:func:`takes_tenant`)."""

    def iter(self, message: str, *, session_id: str, tenant: str = "") -> AsyncIterator[SupportEvent]: ...

    async def ask(self, message: str, *, session_id: str, tenant: str = "") -> TurnResult: ...

    async def history(self, session_id: str, *, tenant: str = "") -> list[Message]: ...

    async def reset(self, session_id: str, *, tenant: str = "") -> None: ...

    async def healthy(self) -> bool: ...


def takes_tenant(desk: object) -> bool:
    """Whether ``desk``'s ``iter``, ``history`` and ``reset`` take the ``tenant`` keyword. Every desk of routegate's
    does; one written before the parameter existed does not, and a server serves it without it (one release)."""
    for name in ("iter", "history", "reset"):
        method = getattr(desk, name, None)
        try:
            parameters = inspect.signature(method).parameters if callable(method) else None
        except (TypeError, ValueError):
            parameters = None
        if parameters is None:
            return False
        if "tenant" not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return False
    return True


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


@runtime_checkable
class TakesHistory(Protocol):
    """A desk whose ``iter`` also takes ``history=``: the conversation a caller keeps itself (an OpenAI client's
    ``messages``), read as untrusted context for a turn that has no stored one (the support desk:
    :mod:`routegate.apps.support.supplied`). The server passes it to such a desk only."""

    def iter(
        self, message: str, *, session_id: str, tenant: str = "", history: Sequence[Message] | None = None
    ) -> AsyncIterator[SupportEvent]: ...

    def takes_history(self) -> bool:
        """Whether :meth:`iter` takes ``history=`` (a desk that forwards to another answers for it)."""
        ...
