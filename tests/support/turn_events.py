"""The last event of a desk turn's stream: a ``FinalEvent`` carrying the turn's ``TurnResult``."""

from __future__ import annotations

from collections.abc import Sequence

from routegate.apps.support.contracts import SupportEvent, TurnResult
from routegate.core import FinalEvent, RunResult


def final_of(events: Sequence[SupportEvent]) -> TurnResult:
    """The turn's result, read from its stream's last event (which must be a ``FinalEvent`` whose result is the
    desk's ``TurnResult``, a ``RunResult``)."""
    last = events[-1]
    assert isinstance(last, FinalEvent), last
    result = last.result
    assert isinstance(result, TurnResult) and isinstance(result, RunResult)
    return result
