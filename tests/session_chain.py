"""One session's turns observed from outside: a first turn names customer 2, then N follow-ups ("Which tickets does
she have?") run at once, over one desk, two desks, two servers or two Ray replicas. Each follow-up resolves "she"
from what the turn before it established and says so in its trace (``{"node": "followup", "carried": "customer 2,
from turn K"}``), and a session's turns are numbered in the order they ran. When the turns run one after the other,
the N follow-ups carry from turns 1..N, each exactly once; turns that overlap read the same history and carry from
the same turn. The stored history is the last five turns (the memory window holds 10 messages) in the order they
ran, each user message followed by its own answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FIRST = "Which city is customer 2 from?"
FOLLOW_UP = "Which tickets does she have? (request {})"
WINDOW_TURNS = 5  # the memory window holds 10 messages: 5 turns


def carried_from(trace: Sequence[Mapping[str, Any]]) -> int | None:
    """The turn a follow-up resolved "she" from (its trace's ``followup`` entry), if it carried anything."""
    for entry in trace:
        if entry.get("node") == "followup" and "customer 2, from turn " in str(entry.get("carried", "")):
            return int(str(entry["carried"]).rsplit(" ", 1)[1])
    return None


def check_serialised(
    carried: dict[int, int | None], stored: Sequence[Mapping[str, Any]], answers: dict[int, str]
) -> None:
    """The follow-ups carried customer 2 from turns 1..N, each once (one ran after another); the history is the last
    five turns in the order they ran, each user message followed by its own answer."""
    assert sorted(turn for turn in carried.values() if turn is not None) == list(range(1, len(carried) + 1)), carried
    assert [m["role"] for m in stored] == ["user", "assistant"] * WINDOW_TURNS
    order = [int(m["content"].rsplit(" ", 1)[1].rstrip(")")) for m in stored[::2]]
    assert [answers[n] for n in order] == [m["content"] for m in stored[1::2]]  # each pair is whole
    ran = [carried[n] for n in order]
    assert ran == sorted(len(carried) - WINDOW_TURNS + 1 + i for i in range(WINDOW_TURNS)), (order, ran)
