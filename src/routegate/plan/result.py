"""``PlanResult``: how a plan run ended — payload, path, envelopes, the trace, the outcome."""

from __future__ import annotations

from typing import Any

from routegate.core.contracts import TraceEntry, jsonable
from routegate.core.outcome import Outcome
from routegate.core.stop_reasons import SUCCESS, Phase
from routegate.errors import RunStopError
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import INTERRUPTED
from routegate.plan.events import StepEvent


class PlanResult:
    """How a plan run ended.

    * ``payload`` — the last step's payload (``None`` when the run stopped);
    * ``ok`` / ``stop_reason`` / ``phase`` / ``message`` — ``"success"`` (phase ``None``, no message), or why the
      run stopped: the failed step's ``step_error:<Exception>``, a :class:`~routegate.errors.RunStopError`'s stop
      reason and phase, ``max_iterations`` or ``max_seconds`` (phase ``"step"``); ``outcome`` is the same as a
      core :class:`~routegate.core.Outcome`; ``error`` the :class:`ErrorInfo` of the stop (``None`` on success);
    * ``raise_for_stop()`` — raises the stop as an exception (see there), returns the result on success;
    * ``path`` — the executed step names, in order; ``envelopes`` — one :class:`Envelope` per executed step
      (payload, error, ``elapsed_ms``); ``envelope(name)`` — the latest one of a step;
    * ``trace`` — the core trace format: one :class:`~routegate.core.TraceEntry` per executed step
      (``phase="step"``, ``next`` = the step routed to, ``why`` = what decided);
    * ``store`` — the store the run wrote to (``None`` when no store was given and no step writes);
    * ``question`` — what a step asked when the run stopped with ``"interrupted"`` (else ``None``);
    * ``checkpoint_key`` — the key a durable run was checkpointed under (a fork's own key); ``None`` otherwise.
    """

    __slots__ = (
        "_decisions",
        "_trace",
        "checkpoint_key",
        "elapsed_ms",
        "envelopes",
        "error",
        "input",
        "payload",
        "store",
    )

    def __init__(
        self,
        input: Any,
        payload: Any,
        error: ErrorInfo | None,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        store: Any,
        elapsed_ms: float,
    ) -> None:
        self.input = input
        self.payload = payload
        self.error = error
        self.envelopes = envelopes
        self._decisions = decisions
        self.store = store
        self.elapsed_ms = elapsed_ms
        self._trace: tuple[TraceEntry, ...] | None = None
        self.checkpoint_key: str | None = None

    @property
    def question(self) -> Any:
        """What the step asked, when the run stopped with ``"interrupted"``; ``None`` otherwise."""
        error = self.error
        if error is None or error.stop_reason != INTERRUPTED:
            return None
        return getattr(error.exception, "question", None)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def stop_reason(self) -> str:
        return SUCCESS if self.error is None else self.error.stop_reason

    @property
    def phase(self) -> Phase | None:
        """Where the run stopped (``"step"``, or the phase a step's ``RunStopError`` named); ``None`` on success."""
        return None if self.error is None else self.error.phase

    @property
    def message(self) -> str:
        """Why the run stopped, for people; empty on success."""
        return "" if self.error is None else self.error.message

    @property
    def outcome(self) -> Outcome:
        error = self.error
        if error is None:
            return Outcome.success()
        return Outcome.stopped(error.stop_reason, error.phase, error.message)

    def raise_for_stop(self) -> PlanResult:
        """Return this result if the run succeeded; else raise the exception that stopped it.

        That is :class:`~routegate.plan.MaxIterationsExceeded` for ``max_iterations``; the step's own exception
        for a failed step (the :class:`~routegate.errors.RunStopError` it raised included, and a nested plan's
        failed step's); a :class:`~routegate.errors.RunStopError` carrying the stop reason and phase for
        ``max_seconds``.
        """
        error = self.error
        if error is None:
            return self
        exc = error.exception
        if exc is None:  # an ErrorInfo built without an exception
            exc = RunStopError(error.stop_reason, error.message, phase=error.phase)
        raise exc

    @property
    def path(self) -> tuple[str, ...]:
        return tuple([env.step or "" for env in self.envelopes])

    def envelope(self, name: str) -> Envelope:
        """The latest envelope of the step ``name`` in this run; ``KeyError`` if it did not run."""
        for env in reversed(self.envelopes):
            if env.step == name:
                return env
        raise KeyError(f"step {name!r} did not run; path: {list(self.path)}")

    @property
    def trace(self) -> tuple[TraceEntry, ...]:
        if self._trace is None:
            pairs = zip(self.envelopes, self._decisions, strict=True)
            self._trace = tuple(
                [StepEvent.of(attempt, env, decision).trace_entry() for attempt, (env, decision) in enumerate(pairs, 1)]
            )
        return self._trace

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "ok" if self.error is None else "stopped",
            "stop_reason": self.stop_reason,
            "payload": jsonable(self.payload),
            "path": list(self.path),
        }
        if self.error is not None:
            out["error"] = self.error.to_dict()
            out["phase"] = self.error.phase
            out["message"] = self.error.message
        out["trace"] = [entry.to_dict() for entry in self.trace]
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def __repr__(self) -> str:
        return f"PlanResult(stop_reason={self.stop_reason!r}, path={list(self.path)})"
