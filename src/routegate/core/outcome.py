"""``Outcome``: the one way a run says how it ended, whichever runtime ran it.

Every run's result carries one as ``.outcome``: the one :class:`~routegate.core.RunResult` type (the routing
agent's, a Plan's, the technique dispatcher's) and the support desk's ``TurnResult``. It is the only value that
says how a run stopped; a result's ``ok``, ``stop_reason``, ``phase`` and ``message`` read it. Code that only
needs to know *whether* and *why* a run stopped reads the outcome and works with all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from routegate.core.stop_reasons import SUCCESS, Phase


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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "stop_reason": self.stop_reason}
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
