"""The values a run reads back are frozen dataclasses: assignment refuses, and equality, ``replace`` and pickling
hold."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from routegate.core.contracts import HistoryEntry, RouteIntent, RouteProposal
from routegate.core.gateway import WorkerCalled
from routegate.core.protocols import RouteDecision

INTENT = RouteIntent("billing", {"ticket": "refund"})
VALUES: list[object] = [
    INTENT,
    RouteProposal("billing", {"ticket": "refund"}),
    HistoryEntry(1, INTENT, {"status": "done"}),
    WorkerCalled({"status": "done"}, "0123456789ab"),
    RouteDecision({"kind": "route"}, decided_by="rules", scores={"billing": 0.9}, why="matched"),
    RouteDecision.proposed("billing", {"ticket": "refund"}),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_a_run_value_refuses_assignment_and_keeps_its_fields(value: object) -> None:
    first = dataclasses.fields(value)[0].name  # type: ignore[arg-type]  # every value here is a dataclass
    before = getattr(value, first)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, first, "changed")
    assert getattr(value, first) is before
    assert not hasattr(value, "__dict__")
    assert dataclasses.replace(value) == value  # type: ignore[type-var]  # a dataclass instance
    assert pickle.loads(pickle.dumps(value)) == value


def test_the_fields_are_stored_by_position_and_by_keyword() -> None:
    assert RouteIntent(target="billing", args={"a": 1}) == RouteIntent("billing", {"a": 1}, "route")
    assert RouteIntent("billing", {}).kind == "route"
    decision = RouteDecision(raw=1)
    assert (decision.raw, decision.decided_by, decision.scores, decision.why) == (1, "", None, "")
    assert repr(HistoryEntry(2, INTENT, {})) == f"HistoryEntry(attempt=2, route={INTENT!r}, observation={{}})"
    with pytest.raises(TypeError):
        RouteIntent("billing")  # type: ignore[call-arg]  # args is required, as before
