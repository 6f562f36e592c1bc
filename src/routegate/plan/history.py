"""A durable run's history: every checkpoint it wrote, listed and rebuilt.

A store keeps every checkpoint a durable run writes (``Store(history=...)`` says how many), numbered from 1 per
run: one before each step, one when a parallel member finishes, one when the run ends or pauses.
:func:`read_history` (``plan.history(key)``, ``routegate plans history``) lists them as :class:`Checkpoint`
summaries — the step about to run, how the run got there (the routing decision, or the stop), the payload handed
to that step, and hashes to compare runs by. :func:`checkpoint_record` rebuilds one checkpoint whole.

Time travel — ``plan.fork(key, at=...)``, ``routegate plans resume KEY --at N`` — re-runs a run from one of its
checkpoints as a **new run** under a key of its own, whose checkpoints name their :class:`Parent`; the original run
is not touched and keeps resuming as before (:mod:`routegate.plan._fork`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from routegate.core.stop_reasons import SUCCESS
from routegate.errors import ConfigurationError
from routegate.plan._deltas import PATH_ONLY, replay
from routegate.plan._signature import canonical_json
from routegate.plan.checkpoint import ENDED, INTERRUPTED, CheckpointLog, Checkpoints, RunRecord
from routegate.plan.errors import CheckpointMismatchError

NO_PAYLOAD: Any = object()
"""``fork(..., payload=NO_PAYLOAD)``: the step about to run gets what the checkpoint hands it."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of a run's history, summarised.

    * ``at`` — its number in the run's history (1: the first; ``fork(key, at=...)`` takes it);
    * ``written`` — when (Unix seconds); ``status`` — running, interrupted or ended, with its ``stop_reason``;
    * ``step`` — the step about to run (``None`` once the run ended); ``iterations`` — the steps run before it;
    * ``route`` — how the run got here: the routing decision after the step before (``"start"`` for the first),
      ``"parallel: <member> finished"``, or the stop reason of an ended or paused run;
    * ``payload`` — what it hands to ``step`` from the step before (JSON; the result's payload once ended), and
      its ``size`` in bytes of JSON;
    * ``input_hash`` — a hash of that payload (``step``'s input, unless it reads ``from_start`` /
      ``from_step``), ``output_hash`` — of what the run handed on after ``step`` ran (the next checkpoint's
      payload, the result's), ``None`` when not known;
    * ``problem`` — why the checkpoint cannot be rebuilt from the store (a damaged row), else ``None``."""

    at: int
    written: float
    status: str
    stop_reason: str
    step: str | None
    iterations: int
    route: str
    payload: Any
    size: int
    input_hash: str | None
    output_hash: str | None = None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Parent:
    """Where a fork started: checkpoint ``at`` of the run ``key`` (``edited``: with a payload of its own)."""

    key: str
    at: int
    edited: bool = False


@dataclass(frozen=True, slots=True)
class RunHistory:
    """The checkpoints of the run ``key`` in order (the oldest the store still keeps first), and the run it was
    forked from, if it is a fork."""

    key: str
    checkpoints: tuple[Checkpoint, ...]
    parent: Parent | None = None

    def __len__(self) -> int:
        return len(self.checkpoints)

    def __iter__(self) -> Iterator[Checkpoint]:
        return iter(self.checkpoints)

    def at(self, number: int) -> Checkpoint:
        """The checkpoint numbered ``number``; :class:`~routegate.errors.ConfigurationError` if the history does not
        hold it."""
        for checkpoint in self.checkpoints:
            if checkpoint.at == number:
                return checkpoint
        raise ConfigurationError(f"the run {self.key!r} has no checkpoint {number} ({_span(self)})")

    def before(self, step: str) -> Checkpoint:
        """The latest checkpoint about to run ``step`` (before its last run); ConfigurationError if it never was."""
        for checkpoint in reversed(self.checkpoints):
            if checkpoint.step == step and checkpoint.status != ENDED and checkpoint.problem is None:
                return checkpoint
        seen = sorted({c.step for c in self.checkpoints if c.step is not None})
        raise ConfigurationError(
            f"no checkpoint of the run {self.key!r} is about to run step {step!r}; its checkpoints run {seen}"
        )


def _span(history: RunHistory) -> str:
    if not history.checkpoints:
        return "its history is empty: the store keeps none (Store(history=False)), or the run was deleted"
    return f"its history holds {history.checkpoints[0].at} to {history.checkpoints[-1].at}"


# -- reading --------------------------------------------------------------------------------------------------------
def _log(backend: Checkpoints) -> CheckpointLog:
    if not isinstance(backend, CheckpointLog):
        raise ConfigurationError(
            f"{type(backend).__name__} keeps no history of a run (it has no append() and history()): use a "
            "routegate.plan.Store"
        )
    return backend


def records(backend: Checkpoints, key: str) -> Iterator[tuple[int, RunRecord]]:
    """Every checkpoint of ``key``'s history, whole, in order; one that cannot be rebuilt has its ``problem``. A
    checkpoint's path (its ``envelopes`` and ``decisions`` lists) grows with the next ones: read each before the
    next, or copy what you keep (:func:`checkpoint_record` does). Path rows (the latest checkpoint's path in a
    store that keeps no history) are no checkpoints: they are left out."""
    rows = _log(backend).history(key)
    meta = dict(rows)
    readable = ((seq, None if record.problem else record.state) for seq, record in rows)
    for seq, doc in replay(readable):
        record = meta[seq]
        if PATH_ONLY in record.state:
            continue
        if isinstance(doc, str):
            yield (
                seq,
                RunRecord(record.key, record.status, record.stop_reason, record.updated, {}, record.problem or doc),
            )
        else:
            yield seq, RunRecord(record.key, record.status, record.stop_reason, record.updated, doc)


def checkpoint_record(backend: Checkpoints, key: str, at: int) -> RunRecord:
    """Checkpoint ``at`` of ``key``'s history, whole (as it was written: not checked against a plan)."""
    numbers: list[int] = []
    for seq, record in records(backend, key):
        if seq == at:
            if record.problem is not None:
                raise CheckpointMismatchError(
                    f"checkpoint {at} of {key!r} cannot be rebuilt from the store: {record.problem}; it is not used"
                )
            state = {**record.state, "envelopes": list(record.state["envelopes"])}
            state["decisions"] = list(record.state["decisions"])
            return RunRecord(record.key, record.status, record.stop_reason, record.updated, state)
        numbers.append(seq)
    held = f"its history holds {numbers[0]} to {numbers[-1]}" if numbers else "it has no history in this store"
    raise ConfigurationError(f"the run {key!r} has no checkpoint {at} ({held}); see `routegate plans history`")


def read_history(backend: Checkpoints, key: str) -> RunHistory:
    """The history of the run ``key`` in ``backend`` (empty when it has none).

    Each checkpoint is rebuilt whole in turn and summarised at once; only the summaries are kept (keeping the
    checkpoints, each with the run's path so far, would hold the square of the run's length)."""
    rows: list[tuple[int, RunRecord, tuple[Any, ...] | None]] = []  # states emptied: the summaries stand for them
    parent: Parent | None = None
    before: tuple[int, int, dict[str, Any]] | None = None  # (iterations, at, band) of the last checkpoint read
    for seq, record in records(backend, key):
        summary: tuple[Any, ...] | None = None
        problem = record.problem
        if problem is None:
            try:
                summary, before = _summary(seq == 1, record, before)
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:  # a row of an unexpected shape
                problem = f"{type(exc).__name__}: {exc}"
            found = record.state.get("parent")
            if isinstance(found, dict) and isinstance(found.get("key"), str) and isinstance(found.get("at"), int):
                parent = Parent(found["key"], found["at"], bool(found.get("edited", False)))
        if summary is None:
            before = None
        rows.append((seq, RunRecord(key, record.status, record.stop_reason, record.updated, {}, problem), summary))
    return RunHistory(key, tuple(_checkpoints(rows)), parent)


def _summary(
    first: bool, record: RunRecord, before: tuple[int, int, dict[str, Any]] | None
) -> tuple[tuple[Any, ...], tuple[int, int, dict[str, Any]]]:
    """``(step, iterations, route, payload, handed, digest)`` of a whole checkpoint (``first``: the history's
    first); ``handed``: is the payload the one handed to the step (else it is an ended run's); ``digest``: its
    hash."""
    doc = record.state
    iterations, position, band = int(doc["iterations"]), int(doc["at"]), dict(doc.get("band") or {})
    if record.status == ENDED:
        result = doc.get("result") or {}
        payload = result.get("payload") if record.stop_reason == SUCCESS else None
        return (None, iterations, record.stop_reason, payload, False, _hash(payload)), (iterations, position, band)
    prev = doc.get("prev") or {}
    payload = prev.get("v") if "e" not in prev else {"error": prev["e"]}
    decisions = doc.get("decisions") or []
    parent = doc.get("parent")
    if record.status == INTERRUPTED:
        route = record.stop_reason
    elif first and isinstance(parent, dict):  # a fork's first checkpoint
        route = f"forked from {parent.get('key')} at {parent.get('at')}"
    elif before is not None and before[:2] == (iterations, position) and band and band != before[2]:
        route = f"parallel: {list(band)[-1]} finished"
    elif decisions:
        route = str(decisions[-1][1])
    else:
        route = "start"
    summary = (str(doc["next"]), iterations, route, payload, True, _hash(payload))
    return summary, (iterations, position, band)


def _checkpoints(rows: list[tuple[int, RunRecord, tuple[Any, ...] | None]]) -> Iterator[Checkpoint]:
    """The summaries as checkpoints, each with the hash of what the run handed on after its step ran."""
    outputs: dict[int, str | None] = {}
    waiting: list[tuple[int, int]] = []  # (seq, iterations) of the checkpoints whose step has not finished yet
    for seq, _, summary in rows:
        if summary is None:
            waiting = []
            continue
        _, iterations, _, payload, handed, digest = summary
        if not handed:  # the run ended: its last step's output is the result's payload (none when it stopped)
            for number, _ in waiting:
                outputs[number] = digest if payload is not None else None
            waiting = []
            continue
        for number, ran in waiting:
            if ran < iterations:
                outputs[number] = digest
        waiting = [(number, ran) for number, ran in waiting if ran >= iterations]
        waiting.append((seq, iterations))
    for seq, record, summary in rows:
        if summary is None:
            yield Checkpoint(
                seq, record.updated, record.status, record.stop_reason, None, 0, "", None, 0, None, None, record.problem
            )
            continue
        step, iterations, route, payload, handed, digest = summary
        yield Checkpoint(
            seq,
            record.updated,
            record.status,
            record.stop_reason,
            step,
            iterations,
            route,
            payload,
            len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()),
            digest if handed else None,
            outputs.get(seq) if handed else digest if payload is not None else None,
        )


def _hash(value: Any) -> str:
    """The first 12 hex digits of the SHA-256 of ``value``'s canonical JSON (the same on every backend)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:12]


def fork_key(key: str, at: int) -> str:
    """The key of a new fork of checkpoint ``at`` of ``key``: ``<key>/at-<at>-<8 hex digits>``."""
    return f"{key}/at-{at}-{uuid.uuid4().hex[:8]}"


__all__ = [
    "NO_PAYLOAD",
    "Checkpoint",
    "Parent",
    "RunHistory",
    "checkpoint_record",
    "fork_key",
    "read_history",
    "records",
]
