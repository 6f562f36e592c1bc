"""The one fault-to-stop conversion: an exception a part raised becomes the stop it ends with, here and nowhere else.

An exception's text is the easiest place for a path, a connection string or a secret to leak, and the caller (an
HTTP client, a model reading the trace, another agent on the bus) does not need it to act. So a fault is reported
by its class only: the exception, with its traceback, goes to the log at WARNING, and the stop's message is
``"<what> raised <ExceptionClass> (details in the log)"``. A :class:`~routegate.errors.RunStopError` is no fault:
a part raised it on purpose, and its stop reason, message and phase are kept.

:meth:`ErrorInfo.of` is that conversion. Every runtime calls it where a part's exception ends something: the Plan
engine for a step (through :meth:`ErrorInfo.from_exception`, which names the part by the step's phase: the router,
the finalizer or the step), the gateway for a worker (``route_error:<t>``), the technique dispatcher for a handler
(``route_error:<t>``, ``route_error:<kind>``) and the routing agent for its output check (``check_error:<Exc>``).
The stop reason stays the caller's to choose; what a fault's message says and where its text goes does not.
:func:`fault_message` is the same report for a fault that becomes an observation or a reply instead of a stop
(an MCP server's, an A2A peer's).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from routegate.core.stop_reasons import Phase, phase_of
from routegate.errors import RunStopError

_logger = logging.getLogger(__name__)
# the part a routing runtime's step of this phase calls, and the family of the stop a fault of it is
_PARTS: dict[str, tuple[str, str]] = {
    "route": ("the router", "router_error"),
    "finalize": ("the finalizer", "finalize_error"),
}


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why a part failed, or why a run stopped: the exception's class name, a message, the stop reason and the
    phase.

    A Plan step's is ``step_error:<ExceptionClass>`` with phase ``"step"`` (``router_error:<Exc>`` /
    ``finalize_error:<Exc>`` for a step of phase ``route`` / ``finalize``), or the ``stop_reason``, message and
    ``phase`` of a :class:`~routegate.errors.RunStopError` the target raised (or, a runtime's step, returned;
    the step's phase when it names none). A fault is reported by its class only (see the module docstring). A run
    that used up its budget carries one too: ``max_iterations`` (a :class:`~routegate.plan.MaxIterationsExceeded`)
    or ``max_seconds`` (a :class:`~routegate.errors.RunStopError`). A nested run (a plan or a routing agent run as
    a step) that stopped carries its own stop reason, message and phase. ``exception`` keeps the exception, for
    the plan's own code (it is in no JSON view).
    """

    type: str
    message: str
    stop_reason: str
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    phase: Phase = "step"

    @classmethod
    def of(cls, exc: BaseException, what: str, stop_reason: str, phase: Phase, logger: logging.Logger) -> ErrorInfo:
        """The stop ``exc`` ends a part with — the one conversion. A :class:`~routegate.errors.RunStopError` keeps
        its stop reason, message and phase (``phase`` when it names none). Any other exception is a fault of
        ``what`` (the part, with its article: ``"the router"``, ``"worker 'refund'"``): logged with its traceback
        on ``logger``, reported by its class only, and it stops with ``stop_reason``."""
        if isinstance(exc, RunStopError):
            return cls(type(exc).__name__, exc.message, exc.stop_reason, exc, phase_of(exc.phase) or phase)
        return cls(type(exc).__name__, fault_message(exc, what, logger), stop_reason, exc, phase)

    @classmethod
    def from_exception(
        cls, exc: BaseException, step: str | None = None, phase: Phase = "step", logger: logging.Logger = _logger
    ) -> ErrorInfo:
        """The stop of a Plan step (named ``step``, of ``phase``) that raised ``exc``, through :meth:`of`: a fault in
        a step of phase ``"route"`` is the router's (``router_error:<Exc>``), of phase ``"finalize"`` the
        finalizer's (``finalize_error:<Exc>``), of any other the step's (``step_error:<Exc>``)."""
        part = _PARTS.get(phase)
        if part is None:
            part = ("the step" if step is None else f"step {step!r}", "step_error")
        what, family = part
        return cls.of(exc, what, f"{family}:{type(exc).__name__}", phase, logger)

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "stop_reason": self.stop_reason}


def fault_message(exc: BaseException, what: str, logger: logging.Logger, *, where: str = "") -> str:
    """Log ``exc`` with its traceback at WARNING on ``logger`` and return the class-only report of it.

    ``what`` names the part with its article (``"the router"``, ``"worker 'refund'"``); ``where`` adds to the log
    line only (``" on task 7f3a"``), for what the operator needs and the caller does not."""
    name = type(exc).__name__
    logger.warning("%s raised %s%s", what, name, where, exc_info=exc)
    return fault_report(name, what)


def fault_report(name: str, what: str) -> str:
    """The class-only report of a fault already logged, for a caller that names the part its own way (the
    technique dispatcher reports a fault of its own plan's step as the dispatch's)."""
    return f"{what} raised {name} (details in the log)"


__all__ = ["ErrorInfo", "fault_message", "fault_report"]
