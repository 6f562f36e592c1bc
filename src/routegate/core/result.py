"""``RunResult[OutputT]``: how a run ended, whichever runtime ran it — one type, generic over the run's output.

Every runtime returns one. They all have:

* ``outcome`` — how the run ended, an :class:`~routegate.core.Outcome` (``ok``, ``stop_reason``, ``phase``,
  ``message``): the one stop value. ``ok``, ``stop_reason``, ``phase``, ``message`` and ``status`` read it;
* ``output`` — what the run produced (the routing agent's answer, a Plan's last payload);
* ``trace`` — one :class:`~routegate.core.TraceEntry` per governed step or Plan step;
* ``run_id`` — the run's id, as in its log line and spans;
* ``elapsed_ms`` — how long the run took.

A runtime adds only its own facts, as a subclass: :class:`AgentResult` (the routing agent: goal, route, history),
:class:`~routegate.plan.PlanResult` (path, envelopes, store), :class:`~routegate.technique.DispatchResult` (the
output kind). Code that only needs to know whether a run succeeded, why it stopped and what it produced reads a
``RunResult`` and works with all of them.

These are plain ``slots`` classes, not frozen dataclasses: one is built on every run, and a frozen dataclass pays
about 1.3k instructions per field at construction (see docs/design-decisions.md). Treat them as read-only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, Literal, Self

from typing_extensions import TypeVar, deprecated

from routegate._lazy import warn_old_attribute
from routegate.core.context import new_run_id
from routegate.core.contracts import ABSENT, HistoryEntry, RouteIntent, TraceEntry, jsonable
from routegate.core.outcome import Outcome, ReadsOutcome
from routegate.core.stop_reasons import SUCCESS

OutputT = TypeVar("OutputT", default=Any)
"""What a run produces: ``str | None`` for the routing agent, a Plan's declared output type (``Any`` unless said)."""

_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


class RunResult(ReadsOutcome, Generic[OutputT]):
    """How a run ended (see the module docstring). Every run returns one; bad input, budgets and timeouts
    included: a run never raises for them.

    ``run_id`` is the run's id; a run that had no context (a Plan run with no budget and no step that asks for
    the context) gets one the first time it is read.
    """

    __slots__ = ("_run_id", "_trace", "elapsed_ms", "outcome", "output")

    def __init__(
        self,
        outcome: Outcome,
        output: OutputT,
        trace: tuple[TraceEntry, ...] | None = (),
        run_id: str | None = None,
        elapsed_ms: float = 0.0,
    ) -> None:
        self.outcome = outcome
        self.output = output
        self._trace = trace
        self._run_id = run_id
        self.elapsed_ms = elapsed_ms

    @property
    def status(self) -> Literal["ok", "stopped"]:
        """``"ok"`` or ``"stopped"``: :attr:`ok` as the word the JSON form uses."""
        return "ok" if self.outcome.ok else "stopped"

    @property
    def trace(self) -> tuple[TraceEntry, ...]:
        """One :class:`~routegate.core.TraceEntry` per governed step or Plan step, in order."""
        trace = self._trace
        if trace is None:
            trace = self._trace = self._build_trace()
        return trace

    def _build_trace(self) -> tuple[TraceEntry, ...]:
        """The trace of a result built without one (``trace=None``): a runtime that builds it only when read
        overrides this."""
        return ()

    @property
    def run_id(self) -> str:
        run_id = self._run_id
        if run_id is None:
            run_id = self._run_id = new_run_id()
        return run_id

    def raise_for_stop(self) -> Self:
        """Return this result if the run succeeded; else raise the stop as a
        :class:`~routegate.errors.RunStopError` carrying its stop reason, message and phase."""
        outcome = self.outcome
        if outcome.ok:
            return self
        raise outcome.as_error()

    def _stop_fields(self) -> dict[str, Any]:
        """How the run ended as the JSON forms begin it: ``status``, ``stop_reason``, then ``phase`` and
        ``message`` when set."""
        outcome = self.outcome
        return outcome.detailed({"status": self.status, "stop_reason": outcome.stop_reason})

    def to_dict(self) -> dict[str, Any]:
        out = self._stop_fields()
        out["output"] = jsonable(self.output)
        out["trace"] = [entry.to_dict() for entry in self.trace]
        out["run_id"] = self.run_id
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(stop_reason={self.stop_reason!r}, output={self.output!r})"


class AgentResult(RunResult[str | None]):
    """How a :class:`~routegate.plan.RoutingAgent` run ended: a :class:`RunResult` whose ``output`` is the final
    answer (``None`` when the run stopped), plus the routing facts.

    * ``goal`` — the request as the run saw it (``""`` when it was not a string);
    * ``selected_route`` — the worker whose observation was finalized (``None`` when the run stopped);
    * ``route`` — the last validated route (set on success and on a stop after validation);
    * ``history`` — every delegation: the route and the observation the worker returned;
    * ``raw_route`` — the router's refused decision (``ABSENT`` unless the policy refused one);
    * ``expected_statuses`` / ``received_status`` / ``bad_observation`` — set when a worker returned an
      observation out of contract (``route_bad_observation``);
    * ``extra`` — the extra fields of a :class:`~routegate.core.FinalAnswer`, merged into :meth:`to_dict`.
    """

    __slots__ = (
        "bad_observation",
        "expected_statuses",
        "extra",
        "goal",
        "history",
        "raw_route",
        "received_status",
        "route",
        "selected_route",
    )

    def __init__(
        self,
        outcome: Outcome,
        output: str | None,
        trace: tuple[TraceEntry, ...],
        run_id: str,
        elapsed_ms: float,
        goal: str,
        selected_route: str | None = None,
        history: tuple[HistoryEntry, ...] = (),
        route: RouteIntent | None = None,
        raw_route: object = ABSENT,
        expected_statuses: tuple[str, ...] | None = None,
        received_status: object = ABSENT,
        bad_observation: object = ABSENT,
        extra: Mapping[str, Any] = _NO_EXTRA,
    ) -> None:
        super().__init__(outcome, output, trace, run_id, elapsed_ms)
        self.goal = goal
        self.selected_route = selected_route
        self.history = history
        self.route = route
        self.raw_route = raw_route
        self.expected_statuses = expected_statuses
        self.received_status = received_status
        self.bad_observation = bad_observation
        self.extra = extra

    @property
    @deprecated("read AgentResult.output instead", category=None)
    def answer(self) -> str | None:
        """Deprecated: :attr:`output` under its old name (warns)."""
        warn_old_attribute("AgentResult", "answer", "output")
        return self.output

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data (the form ``routegate triage`` prints); the answer is under ``"answer"``."""
        out: dict[str, Any] = {
            "status": self.status,
            "stop_reason": self.stop_reason,
        }
        phase = self.phase
        if phase is not None:
            out["phase"] = phase
        out["selected_route"] = self.selected_route
        out["answer"] = self.output
        message = self.message
        if message and self.stop_reason != SUCCESS:
            out["message"] = message
        if self.route is not None:
            out["route"] = self.route.to_dict()
        if self.raw_route is not ABSENT:
            out["raw_route"] = jsonable(self.raw_route)
        if self.expected_statuses is not None:
            out["expected_statuses"] = list(self.expected_statuses)
            out["received_status"] = jsonable(None if self.received_status is ABSENT else self.received_status)
            out["bad_observation"] = jsonable(None if self.bad_observation is ABSENT else self.bad_observation)
        out["trace"] = [entry.to_dict() for entry in self.trace]
        out["history"] = [entry.to_dict() for entry in self.history]
        out["run_id"] = self.run_id
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        if self.extra:
            out.update(jsonable(self.extra))
        return out

    def __repr__(self) -> str:
        return (
            f"AgentResult(stop_reason={self.stop_reason!r}, selected_route={self.selected_route!r}, "
            f"output={self.output!r})"
        )


__all__ = ["AgentResult", "OutputT", "RunResult"]
