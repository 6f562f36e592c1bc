"""``PlanResult``: how a plan run ended — the core :class:`~routegate.core.RunResult` plus the path, the envelopes
and the store."""

from __future__ import annotations

from typing import Any, Generic, Self

from typing_extensions import deprecated

from routegate._lazy import warn_old_attribute
from routegate.core.contracts import TraceEntry, jsonable
from routegate.core.outcome import Outcome
from routegate.core.result import OutputT, RunResult
from routegate.errors import RunStopError
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import INTERRUPTED
from routegate.plan.events import StepEvent

_SUCCESS = Outcome.success()


class PlanResult(RunResult[OutputT | None], Generic[OutputT]):
    """How a plan run ended: a :class:`~routegate.core.RunResult` (``outcome``, ``output``, ``trace``,
    ``run_id``, ``elapsed_ms``, ``ok``) plus what a plan adds.

    * ``output`` — the last step's payload (``None`` when the run stopped); typed by ``Plan[DepsT, OutputT]``;
    * ``outcome`` (and ``ok`` / ``stop_reason`` / ``phase`` / ``message``) — ``"success"`` (phase ``None``, no
      message), or why the run stopped: the failed step's ``step_error:<Exception>``, a
      :class:`~routegate.errors.RunStopError`'s stop reason and phase, ``max_iterations`` or ``max_seconds``
      (phase ``"step"``); ``error`` the :class:`ErrorInfo` of the stop (``None`` on success), with the exception;
    * ``raise_for_stop()`` — raises the stop as an exception (see there), returns the result on success;
    * ``path`` — the executed step names, in order; ``envelopes`` — one :class:`Envelope` per executed step
      (payload, error, ``elapsed_ms``); ``envelope(name)`` — the latest one of a step;
    * ``trace`` — one :class:`~routegate.core.TraceEntry` per executed step (``phase="step"``, ``next`` = the
      step routed to, ``why`` = what decided), built when first read;
    * ``run_id`` — the run's context's id (a nested plan shares its outer run's); a run without a context gets
      one when it is first read;
    * ``store`` — the store the run wrote to (``None`` when no store was given and no step writes);
    * ``question`` — what a step asked when the run stopped with ``"interrupted"`` (else ``None``);
    * ``checkpoint_key`` — the key a durable run was checkpointed under (a fork's own key); ``None`` otherwise;
    * ``input`` — what the run started from.

    ``payload``, the old name of ``output``, still reads it with a :class:`DeprecationWarning`.
    """

    __slots__ = ("_decisions", "checkpoint_key", "envelopes", "error", "input", "store")

    def __init__(
        self,
        input: Any,
        payload: OutputT | None,
        error: ErrorInfo | None,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        store: Any,
        elapsed_ms: float,
        run_id: str | None = None,
    ) -> None:
        outcome = _SUCCESS if error is None else Outcome(False, error.stop_reason, error.phase, error.message)
        super().__init__(outcome, payload, None, run_id, elapsed_ms)  # no trace: built from the envelopes when read
        self.input = input
        self.error = error
        self.envelopes = envelopes
        self._decisions = decisions
        self.store = store
        self.checkpoint_key: str | None = None

    @property
    @deprecated("read PlanResult.output instead", category=None)
    def payload(self) -> OutputT | None:
        """Deprecated: :attr:`output` under its old name (warns)."""
        warn_old_attribute("PlanResult", "payload", "output")
        return self.output

    @property
    def question(self) -> Any:
        """What the step asked, when the run stopped with ``"interrupted"``; ``None`` otherwise."""
        error = self.error
        if error is None or error.stop_reason != INTERRUPTED:
            return None
        return getattr(error.exception, "question", None)

    def raise_for_stop(self) -> Self:
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

    def _build_trace(self) -> tuple[TraceEntry, ...]:
        pairs = zip(self.envelopes, self._decisions, strict=True)
        return tuple(
            [StepEvent.of(attempt, env, decision).trace_entry() for attempt, (env, decision) in enumerate(pairs, 1)]
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "ok" if self.error is None else "stopped",
            "stop_reason": self.stop_reason,
            "payload": jsonable(self.output),
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
