"""How a durable run's history is stored: each checkpoint as a row, most of them as what changed since the row
before.

A checkpoint holds the run's whole path (every envelope and routing decision so far), so storing each one whole
would grow a run's history with the square of its length. The path only grows while a run goes on, so a row
holds the envelopes and decisions added since the row before it (``"+": [envelopes kept, decisions kept]``, the
lists holding only what follows) and leaves out the run's input (the same for the whole attempt); the result of an
ended run holds only the envelopes and decisions that follow its checkpoint's own. The first checkpoint an attempt
writes (a fresh run, a resume, a fork's first) is stored whole, and so is every ``keep``-th row when the history
is pruned (:func:`whole_at`), so that the oldest row kept is whole.

:func:`stored_row` makes a row from a checkpoint; :func:`replay` makes the checkpoints back from the rows, in
order, naming the rows it cannot rebuild (a row that does not parse, a delta whose row before it is missing or
damaged) instead of guessing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

DELTA = "+"
Kept = tuple[int, int]
"""How many envelopes and decisions of the checkpoint are those of the row written before it."""


def whole_at(seq: int, keep: int | None) -> bool:
    """Is the row numbered ``seq`` stored whole because the history keeps only ``keep`` rows (a new block)?"""
    return keep is not None and keep > 0 and (seq - 1) % keep == 0


def pruned_below(seq: int, keep: int) -> int:
    """The rows below this number go when row ``seq`` starts a block: every block but this one and the one before
    it, so that at least ``keep`` checkpoints stay and the oldest kept row is whole."""
    return seq - keep


def stored_row(state: dict[str, Any], kept: Kept | None) -> dict[str, Any]:
    """The history row of the checkpoint ``state``: whole (``kept`` is ``None``), or what changed since the row
    before, whose first ``kept`` envelopes and decisions it shares. ``state`` itself when the row is the
    checkpoint as it is."""
    envelopes, decisions, result = state.get("envelopes"), state.get("decisions"), state.get("result")
    if kept is None and result is None:
        return state
    row = dict(state)
    if kept is not None and isinstance(envelopes, list) and isinstance(decisions, list):
        row[DELTA] = list(kept)
        row["envelopes"] = envelopes[kept[0] :]
        row["decisions"] = decisions[kept[1] :]
        row.pop("input", None)
    if isinstance(result, dict) and isinstance(envelopes, list) and isinstance(decisions, list):
        shared = (_shared(envelopes, result.get("envelopes")), _shared(decisions, result.get("decisions")))
        if shared != (0, 0):
            row["result"] = {
                **result,
                DELTA: list(shared),
                "envelopes": result["envelopes"][shared[0] :],
                "decisions": result["decisions"][shared[1] :],
            }
    return row


def _shared(mine: list[Any], theirs: object) -> int:
    """How many items ``theirs`` starts with that are ``mine`` (all of them, or none)."""
    if isinstance(theirs, list) and len(theirs) >= len(mine) and theirs[: len(mine)] == mine:
        return len(mine)
    return 0


class Damaged(ValueError):
    """A row that cannot be rebuilt into its checkpoint."""


def replay(rows: Iterable[tuple[int, dict[str, Any] | None]]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """The checkpoints of ``rows`` (``(number, row)`` in order; ``None``: a row that did not parse), each whole, or
    the text saying why a row cannot be rebuilt.

    A checkpoint's ``envelopes`` and ``decisions`` are the lists the next checkpoints grow: read each one before
    asking for the next, or copy what you keep."""
    envelopes: list[Any] = []
    decisions: list[Any] = []
    first: Any = None
    before = -1  # the number of the last row rebuilt (-1: none, or it was damaged)
    for seq, row in rows:
        if row is None:
            before = -1
            yield seq, "the row cannot be read"
            continue
        try:
            doc, envelopes, decisions, first = _rebuilt(row, envelopes, decisions, first, before == seq - 1)
        except Damaged as exc:
            before = -1
            yield seq, str(exc)
            continue
        before = seq
        yield seq, doc


def _rebuilt(
    row: dict[str, Any], envelopes: list[Any], decisions: list[Any], first: Any, follows: bool
) -> tuple[dict[str, Any], list[Any], list[Any], Any]:
    doc = dict(row)
    delta = doc.pop(DELTA, None)
    tail_e, tail_d = doc.get("envelopes"), doc.get("decisions")
    if not isinstance(tail_e, list) or not isinstance(tail_d, list):
        raise Damaged("its envelopes or decisions are not lists")
    if delta is None:  # the lists are grown in place from here: copies, not the row's own
        envelopes, decisions, first = list(tail_e), list(tail_d), doc.get("input")
    else:
        if not follows:
            raise Damaged("it holds the changes since the checkpoint before it, which is missing or damaged")
        ke, kd = _counts(delta, len(envelopes), len(decisions))
        envelopes, decisions = _grown(envelopes, ke, tail_e), _grown(decisions, kd, tail_d)
        doc["input"] = first
    doc["envelopes"], doc["decisions"] = envelopes, decisions
    result = doc.get("result")
    if isinstance(result, dict) and DELTA in result:
        result = dict(result)
        ke, kd = _counts(result.pop(DELTA), len(envelopes), len(decisions))
        ends_e, ends_d = result.get("envelopes"), result.get("decisions")
        if not isinstance(ends_e, list) or not isinstance(ends_d, list):
            raise Damaged("its result's envelopes or decisions are not lists")
        result["envelopes"], result["decisions"] = envelopes[:ke] + ends_e, decisions[:kd] + ends_d
        doc["result"] = result
    return doc, envelopes, decisions, first


def _grown(items: list[Any], kept: int, tail: list[Any]) -> list[Any]:
    """``items[:kept] + tail``, in place when all of ``items`` is kept (a run's path only grows within an attempt:
    copying it for every row would cost the square of the run's length)."""
    if kept == len(items):
        items.extend(tail)
        return items
    return items[:kept] + tail


def _counts(delta: object, envelopes: int, decisions: int) -> Kept:
    if (
        not isinstance(delta, list)
        or len(delta) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in delta)
        or not (0 <= delta[0] <= envelopes and 0 <= delta[1] <= decisions)
    ):
        raise Damaged(f"its delta {delta!r} does not fit the checkpoint before it")
    return delta[0], delta[1]


__all__ = ["DELTA", "Damaged", "Kept", "pruned_below", "replay", "stored_row", "whole_at"]
