"""``Outcome``: the one way a run says how it ended, whichever runtime ran it.

Every run's result carries one as ``.outcome``: the one :class:`~routegate.core.RunResult` type, whichever
runtime made it (the routing agent's, a Plan's, the technique dispatcher's, the support desk's ``TurnResult``). It is the only value that
says how a run stopped; a result's ``ok``, ``stop_reason``, ``phase`` and ``message`` read it. Code that only
needs to know *whether* and *why* a run stopped reads the outcome and works with all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from routegate.core.stop_reasons import SUCCESS, Phase
from routegate.errors import RunStopError


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: ``ok`` (the stop reason is ``"success"``), the stop reason, the phase it stopped in
    (``None`` on success) and a message for people (empty on success)."""

    ok: bool
    stop_reason: str
    phase: Phase | None = None
    message: str = ""

    @classmethod
    def success(cls) -> Outcome:
        return _SUCCESS

    @classmethod
    def stopped(cls, stop_reason: str, phase: Phase | None, message: str = "") -> Outcome:
        """A run that ended on ``stop_reason`` (``"success"`` gives the successful outcome)."""
        if stop_reason == SUCCESS:
            return _SUCCESS
        return cls(False, stop_reason, phase, message or stop_reason)

    def as_error(self) -> RunStopError:
        """This stop as the :class:`~routegate.errors.RunStopError` that carries it (its stop reason, message and
        phase): what a step returns or raises to end its run so, and what ``raise_for_stop`` raises."""
        return RunStopError(self.stop_reason, self.message, phase=self.phase)

    def to_dict(self) -> dict[str, Any]:
        return self.detailed({"ok": self.ok, "stop_reason": self.stop_reason})

    def detailed(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` (a JSON form's first fields) with ``phase`` and ``message`` added when they are set: the order
        every JSON form of a stop uses."""
        if self.phase is not None:
            out["phase"] = self.phase
        if self.message:
            out["message"] = self.message
        return out


_SUCCESS = Outcome(True, SUCCESS)


class HasStopReason:
    """Gives a result type that stores its ``stop_reason`` its ``ok``: it ended well when that is ``"success"``."""

    __slots__ = ()
    stop_reason: str

    @property
    def ok(self) -> bool:
        return self.stop_reason == SUCCESS


class ReadsOutcome:
    """Gives a type that holds an ``outcome`` its ``ok``, ``stop_reason``, ``phase`` and ``message``, read from it
    (a run's result, a dispatched part's outcome)."""

    __slots__ = ()
    outcome: Outcome

    @property
    def ok(self) -> bool:
        """Whether it succeeded (its stop reason is ``"success"``)."""
        return self.outcome.ok

    @property
    def stop_reason(self) -> str:
        """``"success"``, or why it stopped (``outcome.stop_reason``)."""
        return self.outcome.stop_reason

    @property
    def phase(self) -> Phase | None:
        """Where it stopped (``outcome.phase``); ``None`` on success."""
        return self.outcome.phase

    @property
    def message(self) -> str:
        """Why it stopped, for people (``outcome.message``); empty on success."""
        return self.outcome.message
