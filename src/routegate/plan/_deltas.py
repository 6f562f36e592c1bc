"""How a durable run's checkpoints are stored: each as a history row, most of them as what changed since the row
before, and the latest as a head that names the rows holding its path.

A checkpoint holds the run's whole path (every envelope and routing decision so far), so storing each one whole
would grow a run's history with the square of its length. The path only grows while a run goes on, so a row
holds the envelopes and decisions added since the row before it (``"+": [envelopes kept, decisions kept]``, the
lists holding only what follows) and leaves out the run's input (the same for the whole attempt); the result of an
ended run holds only the envelopes and decisions that follow its checkpoint's own. The first checkpoint an attempt
writes (a fresh run, a resume, a fork's first) is stored whole. A history that keeps ``N`` rows
(``Store(history=N)``) is pruned every ``N`` rows (:func:`whole_at`, :func:`pruned_below`): the rows below the
``N`` kept that an attempt's later rows are still rebuilt from become path rows (:func:`stripped`), the others go.

:func:`stored_row` makes a row from a checkpoint; :func:`replay` makes the checkpoints back from the rows, in
order, naming the rows it cannot rebuild (a row that does not parse, a delta whose row before it is missing or
damaged) instead of guessing.

The latest checkpoint of a run (the row of ``plan_runs``) is stored as a *head* (:func:`head_row`, format
:data:`HEAD`): the checkpoint without its path, and ``"path": [first, last, envelopes, decisions]``, the history rows
``first`` (whole) to ``last`` whose replay ends with its path (:func:`rebuilt_head`). Rewriting the whole path at
every step would cost the square of the run's length. A store that keeps no history (``Store(history=False)``)
appends *path rows* for that (:func:`path_row`: only the envelopes and decisions, marked :data:`PATH_ONLY`), which
no listing of the history shows and the first row of the next attempt deletes. A head written before heads existed
holds its checkpoint whole and is read as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

DELTA = "+"
HEAD = 4
"""The ``format`` of a stored head: older releases refuse it by its format instead of misreading it."""
OF = "of"  # a head's field: the format of the checkpoint it stands for
PATH = "path"  # a head's field: [first row, last row, envelopes, decisions]
PATH_ONLY = "~path"  # the field that marks a path row (value 1)
Kept = tuple[int, int]
"""How many envelopes and decisions of the checkpoint are those of the row written before it."""


def whole_at(seq: int, keep: int | None) -> bool:
    """Does the row numbered ``seq`` start a block of a history that keeps only ``keep`` rows (the older rows are
    pruned when it is written)?"""
    return keep is not None and keep > 0 and (seq - 1) % keep == 0


def pruned_below(seq: int, keep: int) -> int:
    """The rows below this number leave the history when row ``seq`` starts a block: every block but this one and
    the one before it, so that at least ``keep`` checkpoints stay."""
    return seq - keep


def stripped(row: dict[str, Any]) -> dict[str, Any]:
    """History row ``row`` as a path row (what a later row of its attempt is rebuilt from): its path (changes, or
    whole with the run's input) without the rest of its checkpoint. A path row comes back as it is."""
    if PATH_ONLY in row:
        return row
    out: dict[str, Any] = {PATH_ONLY: 1}
    if DELTA in row:
        out[DELTA] = row[DELTA]
    elif "input" in row:
        out["input"] = row["input"]
    out["envelopes"], out["decisions"] = row.get("envelopes"), row.get("decisions")
    return out


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
        row["result"] = _result_delta(result, envelopes, decisions)
    return row


def path_row(state: dict[str, Any], kept: Kept | None) -> dict[str, Any]:
    """The path row of the checkpoint ``state`` for a store that keeps no history: its whole path (``kept`` is
    ``None``) or what was added since the row before."""
    envelopes, decisions = state.get("envelopes"), state.get("decisions")
    if not isinstance(envelopes, list) or not isinstance(decisions, list):
        raise TypeError("a checkpoint's envelopes and decisions are lists")
    if kept is None:
        return {PATH_ONLY: 1, "envelopes": envelopes, "decisions": decisions}
    return {PATH_ONLY: 1, DELTA: list(kept), "envelopes": envelopes[kept[0] :], "decisions": decisions[kept[1] :]}


def head_row(state: dict[str, Any], first: int, last: int) -> dict[str, Any]:
    """The head of the checkpoint ``state``, whose path is that of history row ``last`` rebuilt from row ``first``
    (whole) on; an ended run's result holds only what follows the path."""
    envelopes, decisions = state.get("envelopes"), state.get("decisions")
    if not isinstance(envelopes, list) or not isinstance(decisions, list):
        raise TypeError("a checkpoint's envelopes and decisions are lists")
    row = {k: v for k, v in state.items() if k not in ("envelopes", "decisions")}
    row["format"], row[OF], row[PATH] = HEAD, state.get("format"), [first, last, len(envelopes), len(decisions)]
    result = state.get("result")
    if isinstance(result, dict):
        row["result"] = _result_delta(result, envelopes, decisions)
    return row


def is_head(state: dict[str, Any]) -> bool:
    """Is ``state`` (a row of ``plan_runs``) a head, whose path is in the history rows?"""
    return state.get("format") == HEAD and not isinstance(state.get("format"), bool)


def head_rows(head: dict[str, Any]) -> tuple[int, int]:
    """The history rows ``(first, last)`` the path of ``head`` is rebuilt from; :class:`Damaged` if it names none."""
    ref = head.get(PATH)
    if (
        not isinstance(ref, list)
        or len(ref) != 4
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in ref)
        or not 1 <= ref[0] <= ref[1]
    ):
        raise Damaged(f"its path names no history rows ({ref!r})")
    return ref[0], ref[1]


def rebuilt_head(head: dict[str, Any], rows: Iterable[tuple[int, dict[str, Any] | None]]) -> dict[str, Any]:
    """The checkpoint ``head`` stands for, its path rebuilt from ``rows`` (its history rows ``first`` to ``last``,
    in order; ``None``: a row that did not parse); :class:`Damaged` when they do not hold it."""
    _, last = head_rows(head)
    _, _, count_e, count_d = head[PATH]
    if "envelopes" in head or "decisions" in head:
        raise Damaged("it holds a path of its own beside the history rows it names")
    found: dict[str, Any] | str | None = None
    for seq, doc in replay(rows):  # a delta at ``first`` has no row before it here: replay names it damaged
        if seq == last:
            found = doc
    if found is None:
        raise Damaged(f"history row {last}, which holds its path, is missing")
    if isinstance(found, str):
        raise Damaged(f"history row {last}, which holds its path, cannot be rebuilt: {found}")
    envelopes, decisions = found["envelopes"], found["decisions"]
    if (len(envelopes), len(decisions)) != (count_e, count_d):
        raise Damaged(
            f"history row {last} holds a path of {len(envelopes)} envelopes and {len(decisions)} decisions, not "
            f"{count_e} and {count_d}"
        )
    doc = {k: v for k, v in head.items() if k not in (OF, PATH)}
    doc["format"] = head.get(OF)
    doc["envelopes"], doc["decisions"] = envelopes, decisions
    _result_whole(doc, envelopes, decisions)
    return doc


def _result_delta(result: dict[str, Any], envelopes: list[Any], decisions: list[Any]) -> dict[str, Any]:
    """An ended run's result as stored beside its checkpoint: only the envelopes and decisions that follow the
    checkpoint's own path (``envelopes``, ``decisions``), when it starts with that path; else as it is."""
    shared = (_shared(envelopes, result.get("envelopes")), _shared(decisions, result.get("decisions")))
    if shared == (0, 0):
        return result
    return {
        **result,
        DELTA: list(shared),
        "envelopes": result["envelopes"][shared[0] :],
        "decisions": result["decisions"][shared[1] :],
    }


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
    _result_whole(doc, envelopes, decisions)
    return doc, envelopes, decisions, first


def _result_whole(doc: dict[str, Any], envelopes: list[Any], decisions: list[Any]) -> None:
    """Make ``doc``'s result whole when it is stored as what follows the checkpoint's own path (``envelopes``,
    ``decisions``)."""
    result = doc.get("result")
    if isinstance(result, dict) and DELTA in result:
        result = dict(result)
        ke, kd = _counts(result.pop(DELTA), len(envelopes), len(decisions))
        ends_e, ends_d = result.get("envelopes"), result.get("decisions")
        if not isinstance(ends_e, list) or not isinstance(ends_d, list):
            raise Damaged("its result's envelopes or decisions are not lists")
        result["envelopes"], result["decisions"] = envelopes[:ke] + ends_e, decisions[:kd] + ends_d
        doc["result"] = result


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


__all__ = [
    "DELTA",
    "HEAD",
    "PATH_ONLY",
    "Damaged",
    "Kept",
    "head_row",
    "head_rows",
    "is_head",
    "path_row",
    "pruned_below",
    "rebuilt_head",
    "replay",
    "stored_row",
    "stripped",
    "whole_at",
]
