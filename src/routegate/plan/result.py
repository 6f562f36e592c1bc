"""``PlanResult``: how a plan run ended — payload, path, envelopes, the trace."""

from __future__ import annotations

from typing import Any

from routegate.core.contracts import TraceEntry, jsonable
from routegate.plan.envelope import Envelope, ErrorInfo

SUCCESS = "success"


class PlanResult:
    """How a plan run ended.

    * ``payload`` — the last step's payload (``None`` when the run ended on a failed step);
    * ``ok`` / ``error`` / ``stop_reason`` — ``"success"``, or the failed step's ``step_error:<Exception>``;
    * ``path`` — the executed step names, in order; ``envelopes`` — one :class:`Envelope` per executed step
      (payload, error, ``elapsed_ms``); ``envelope(name)`` — the latest one of a step;
    * ``trace`` — the core trace format: one :class:`~routegate.core.TraceEntry` per executed step
      (``phase="step"``, ``next`` = the step routed to, ``why`` = what decided);
    * ``store`` — the store the run wrote to (``None`` when no store was given and no step writes).
    """

    __slots__ = ("_decisions", "_trace", "elapsed_ms", "envelopes", "error", "input", "payload", "store")

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

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def stop_reason(self) -> str:
        return SUCCESS if self.error is None else self.error.stop_reason

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
            entries = []
            for attempt, (env, (nxt, why)) in enumerate(zip(self.envelopes, self._decisions, strict=True), 1):
                error = env.error
                entries.append(
                    TraceEntry(
                        attempt=attempt,
                        target=env.step,
                        ok=error is None,
                        phase="step",
                        elapsed_ms=round(env.elapsed_ms, 3),
                        stop_reason=None if error is None else error.stop_reason,
                        why=why,
                        next=nxt,
                    )
                )
            self._trace = tuple(entries)
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
        out["trace"] = [entry.to_dict() for entry in self.trace]
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def __repr__(self) -> str:
        return f"PlanResult(stop_reason={self.stop_reason!r}, path={list(self.path)})"
