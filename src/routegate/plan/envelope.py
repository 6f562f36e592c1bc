"""The value one step hands to the routing rules and to the next step: payload, error and metadata."""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from routegate.core._faults import fault_message
from routegate.core.contracts import jsonable
from routegate.core.governed import phase_of
from routegate.core.stop_reasons import Phase
from routegate.errors import RunStopError

_logger = logging.getLogger(__name__)
# the part a routing runtime's step of this phase calls, and the stop reason a fault of it is (stop_reasons.py)
_PARTS: dict[str, tuple[str, str]] = {
    "route": ("the router", "router_error"),
    "finalize": ("the finalizer", "finalize_error"),
}


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why a step failed, or why the run stopped: the exception's class name, a message, the stop reason and
    the phase.

    ``stop_reason`` is ``step_error:<ExceptionClass>`` with phase ``"step"``, or the ``stop_reason``, message and
    ``phase`` of a :class:`~routegate.errors.RunStopError` the target raised (or, a runtime's step, returned;
    ``"step"`` when it names none). A fault is reported by its class only: the message of
    ``step_error:<ExceptionClass>`` is the report of :func:`routegate.core._faults.fault_message` for
    ``"step 'name'"``, and the exception's text and traceback go
    to the log (``routegate.plan.envelope``, WARNING). A run that used up its budget carries one too:
    ``max_iterations`` (a :class:`~routegate.plan.MaxIterationsExceeded`) or ``max_seconds`` (a
    :class:`~routegate.errors.RunStopError`). A nested run (a plan or a routing agent run as a step) that stopped
    carries its own stop reason, message and phase. ``exception`` keeps the exception, for the plan's own code
    (it is in no JSON view).
    """

    type: str
    message: str
    stop_reason: str
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    phase: Phase = "step"

    @classmethod
    def from_exception(cls, exc: BaseException, step: str | None = None, phase: Phase = "step") -> ErrorInfo:
        """The error of a step (named ``step``, of ``phase``) that raised ``exc``: a stop signal keeps its text
        (and its phase, else the step's), a fault is reported by its class only
        (:func:`routegate.core._faults.fault_message`).

        The one fault-to-stop conversion of every runtime built on the Plan: a fault in a step of phase
        ``"route"`` is the router's (``router_error:<Exc>``), of phase ``"finalize"`` the finalizer's
        (``finalize_error:<Exc>``), of any other the step's (``step_error:<Exc>``)."""
        if isinstance(exc, RunStopError):
            return cls(type(exc).__name__, exc.message, exc.stop_reason, exc, phase_of(exc.phase) or phase)
        if isinstance(exc, StepFailedError):
            return exc.info
        name = type(exc).__name__
        part = _PARTS.get(phase)
        if part is not None:
            what, prefix = part
            return cls(name, fault_message(exc, what, _logger), f"{prefix}:{name}", exc, phase)
        what = "the step" if step is None else f"step {step!r}"
        return cls(name, fault_message(exc, what, _logger), f"step_error:{name}", exc, phase)

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "stop_reason": self.stop_reason}


class StepFailedError(Exception):
    """Ends a step with an :class:`ErrorInfo` already made (not a fault to report): the stop of a nested run — a
    routing agent run as a step, with its result in the envelope's ``metadata`` — or the engine's own diagnosis
    of a misused target. Internal to the Plan engine; a step that means to stop its run raises
    :class:`~routegate.errors.RunStopError`."""

    def __init__(self, info: ErrorInfo, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(info.message)
        self.info = info
        self.metadata = metadata


class Envelope:
    """One step's output as the routing rules see it.

    ``payload`` is what the step returned (validated into ``output=`` when the step declares one); ``error`` is
    set instead when the step failed; ``metadata`` is free-form. ``step`` and ``elapsed_ms`` say which step
    produced it and how long its target took. Treat envelopes as read-only.
    """

    __slots__ = ("_metadata", "elapsed_ms", "error", "payload", "step")

    def __init__(
        self,
        payload: Any = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
        step: str | None = None,
        elapsed_ms: float = 0.0,
    ) -> None:
        self.payload = payload
        self.error = error
        self._metadata = metadata  # None: made on first read (most envelopes never carry any)
        self.step = step
        self.elapsed_ms = elapsed_ms

    @property
    def metadata(self) -> dict[str, Any]:
        """Free-form metadata (a nested plan's step: ``{"plan": <its PlanResult>}``); empty unless set."""
        metadata = self._metadata
        if metadata is None:
            metadata = self._metadata = {}
        return metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._metadata = value

    @property
    def ok(self) -> bool:
        return self.error is None

    def text(self) -> str:
        """The payload as text: strings as they are, models and containers as JSON."""
        return payload_text(self.payload)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "payload": jsonable(self.payload)}
        if self.error is not None:
            out["error"] = self.error.to_dict()
        if self._metadata:
            out["metadata"] = jsonable(self._metadata)
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def __repr__(self) -> str:
        state = f"error={self.error!r}" if self.error is not None else f"payload={self.payload!r}"
        return f"Envelope(step={self.step!r}, {state})"


def payload_text(payload: Any) -> str:
    """Render a payload as text for a model or a routing agent: ``str`` as is, anything else as JSON."""
    if payload is None:
        return ""
    if isinstance(payload, str):
        return payload
    model_dump_json = getattr(payload, "model_dump_json", None)
    if callable(model_dump_json):
        return str(model_dump_json())
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        return json.dumps(jsonable(dataclasses.asdict(payload)), ensure_ascii=False)
    return json.dumps(jsonable(payload), ensure_ascii=False)
