"""The value one step hands to the routing rules and to the next step: payload, error and metadata."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from routegate.core._faults import ErrorInfo
from routegate.core.contracts import jsonable
from routegate.core.stop_reasons import Phase

_logger = logging.getLogger(__name__)  # where a step's fault is logged, with its traceback


def step_stop(exc: BaseException, step: str, phase: Phase) -> ErrorInfo:
    """The stop of step ``step`` (of ``phase``) that raised ``exc`` (or, a runtime's step, returned its
    :class:`~routegate.errors.RunStopError`): the one fault-to-stop conversion,
    :meth:`ErrorInfo.from_exception` (``ErrorInfo`` is the core's; its name here stays), logged here."""
    return ErrorInfo.from_exception(exc, step, phase, _logger)


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


__all__ = ["Envelope", "ErrorInfo", "StepFailedError", "payload_text", "step_stop"]
