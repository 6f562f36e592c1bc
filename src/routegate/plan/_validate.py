"""Checking a stored checkpoint before it steers a run: its shape, and that its position follows from its path.

Whoever can write the checkpoint database controls the document, so a resume reads nothing positional on trust.
:func:`check_checkpoint` parses the document into a strict model (every field with the type the writer gives it)
and replays the recorded path — every executed step and the routing decision after it — through the plan's
graph: each step must be the one the previous decision leads to, each decision one the plan's routing can make
there (a route of that step, the pending rejoin of an exclusive branch, or the next step in declared order).
The replay ends at a step, a pending rejoin and a step count, and those must be the ones the checkpoint says it
resumes at. Anything else is a :class:`~routegate.plan.CheckpointMismatchError` naming the run and what does
not fit. Predicates are not re-run: a writer who also edits the payloads can still pick another of the routes
a step has; signing the checkpoints (``Store(signing_key=...)``) is what stops that.
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from routegate.plan._shape import StepShape
from routegate.plan.checkpoint import ENDED, INTERRUPTED, RUNNING, RunRecord
from routegate.plan.errors import CheckpointMismatchError

FORMATS = (1, 2, 3)  # 2: format 1 plus the optional HMAC "sig"; 3: format 2 plus "parent", a fork's origin

_Int = Annotated[int, Strict()]
_Text = Annotated[str, Strict()]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Error(_Model):
    type: _Text
    message: _Text
    stop_reason: _Text
    phase: _Text = "step"
    question: Any = None
    key: _Text | None = None


class _Envelope(_Model):
    s: _Text
    p: Any = None
    ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    e: _Error | None = None


class _Prev(_Model):
    v: Any = None
    e: _Error | None = None


class _Result(_Model):
    stop_reason: _Text
    payload: Any = None
    error: _Error | None = None
    envelopes: list[_Envelope]
    decisions: list[tuple[_Text | None, _Text]]
    elapsed_ms: float = Field(default=0.0, allow_inf_nan=False)


class _Parent(_Model):
    key: _Text
    at: _Int = Field(ge=1)
    edited: bool = False


class _Document(_Model):
    format: _Int
    fingerprint: _Text
    input: Any = None
    at: _Int = Field(ge=0)
    next: _Text
    prev: _Prev
    iterations: _Int = Field(ge=0)
    allowance: _Int = Field(ge=0)
    rejoin: _Int = Field(ge=-1)
    envelopes: list[_Envelope]
    decisions: list[tuple[_Text | None, _Text]]
    store: dict[str, Any]
    band: dict[str, _Envelope]
    answers: dict[str, list[Any]]
    asked: _Text | None = None
    result: _Result | None = None
    sig: _Text | None = None
    parent: _Parent | None = None


class _Refusal(Exception):
    """What does not fit, raised inside the checks and turned into the one error at the edge."""


def _refuse(what: str) -> NoReturn:
    raise _Refusal(what)


def check_readable(record: RunRecord) -> None:
    """Refuse a row that did not parse, or a document of a format this version does not read (checked before
    anything else of it is looked at)."""
    key = record.key
    if record.problem is not None:
        raise CheckpointMismatchError(
            f"the checkpoint of {key!r} cannot be read: {record.problem}; it is not resumed: start over with "
            "resume=False or another checkpoint_key"
        )
    version = record.state.get("format")
    if version not in FORMATS or isinstance(version, bool):
        raise CheckpointMismatchError(
            f"the checkpoint of {key!r} has format {version!r}; this routegate reads formats "
            f"{', '.join(map(str, FORMATS))}: resume it with the routegate version that wrote it, or start over "
            "with resume=False or another checkpoint_key"
        )


def check_checkpoint(steps: tuple[StepShape, ...], record: RunRecord) -> None:
    """Raise :class:`CheckpointMismatchError` unless ``record`` is a checkpoint the plan of shape ``steps`` could
    have written.

    Checked: the document's shape; that the recorded path and decisions are a walk of the plan's graph; that
    the step about to run, the pending rejoin and the step count are where that walk ends; that the parallel
    band members and the interrupt answers it holds belong to that step; and that the status agrees with the
    document (an interrupted run names the question's key, a finished run holds its result, a successful one a
    walk to the plan's end)."""
    key = record.key
    check_readable(record)
    try:
        doc = _Document.model_validate(record.state)
    except ValidationError as exc:
        raise damaged(key, _shape(exc)) from None
    try:
        _check(steps, record, doc)
    except _Refusal as exc:
        raise damaged(key, str(exc)) from None


def damaged(key: str, what: str) -> CheckpointMismatchError:
    """The refusal of the checkpoint of ``key``, damaged or edited (``what`` says how)."""
    return CheckpointMismatchError(
        f"the checkpoint of {key!r} is damaged or was edited: {what}; it is not resumed: start over with "
        "resume=False or another checkpoint_key"
    )


def _shape(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:3]:
        parts = error.get("loc", ())  # dict keys of the document: shown with repr when not printable
        where = ".".join(str(p) if str(p).isprintable() else repr(p) for p in parts) or "document"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def _check(compiled: tuple[StepShape, ...], record: RunRecord, doc: _Document) -> None:
    count = len(compiled)
    status = record.status
    if status not in (RUNNING, ENDED, INTERRUPTED):
        _refuse(f"status {status!r} is none of running, ended, interrupted")
    if (doc.parent is not None) != (doc.format == 3):
        _refuse(f"format {doc.format} {'holds' if doc.parent is not None else 'lacks'} a fork's parent")
    if doc.at >= count or doc.rejoin >= count:
        _refuse(f"it resumes at step {doc.at} (rejoin {doc.rejoin}) of a plan of {count} steps")
    step = compiled[doc.at]
    if doc.next != step.name:
        _refuse(f"it names {doc.next!r} as the next step, but its position {doc.at} is {step.name!r}")
    at, rejoin, units = walk(compiled, doc.envelopes, doc.decisions)
    if at >= count:
        _refuse("its path already reached the plan's end; nothing is left to run")
    if at != doc.at:
        _refuse(f"it resumes at {step.name!r}, but its path and decisions lead to {compiled[at].name!r}")
    if rejoin != doc.rejoin:
        _refuse(
            f"its pending rejoin is {_rejoin_text(compiled, doc.rejoin)}, but its path leaves {_rejoin_text(compiled, rejoin)}"
        )
    if units != doc.iterations:
        _refuse(f"it counts {doc.iterations} steps run, but its path holds {units}")
    if doc.allowance > doc.iterations:
        _refuse(f"its step allowance {doc.allowance} exceeds the {doc.iterations} steps it ran")
    members = {m.name for m in compiled[step.index : step.band_end]} if step.band_end else set()
    for name, env in doc.band.items():
        if name not in members or env.s != name or env.e is not None:
            _refuse(
                f"it holds a finished parallel member {name!r} that is not a member of {step.name!r} that succeeded"
            )
    keys = {f"{record.key}/{doc.iterations + 1}/{name}" for name in (members or {step.name})}
    for answered in doc.answers:
        if answered not in keys:
            _refuse(f"it holds interrupt answers for {answered!r}, which is not the step about to run")
    _check_status(compiled, status, record.stop_reason, doc, keys)


def _check_status(
    compiled: tuple[StepShape, ...], status: str, stop_reason: str, doc: _Document, keys: set[str]
) -> None:
    result = doc.result
    if status == RUNNING:
        if result is not None or doc.asked is not None:
            _refuse("it is marked running but holds the result (or the question) of an ended run")
        return
    if result is None:
        _refuse(f"it is marked {status} but holds no result")
    if result.stop_reason != stop_reason:
        _refuse(f"it is marked {stop_reason!r} but its result says {result.stop_reason!r}")
    if status == INTERRUPTED:
        if stop_reason != INTERRUPTED or result.error is None or result.error.stop_reason != INTERRUPTED:
            _refuse("it is marked interrupted but its result is not an interrupt")
        if result.error.key != doc.asked or (doc.asked is not None and doc.asked not in keys):
            # asked is None only for ``raise Interrupt(...)``, which takes no answer
            _refuse(f"the question it waits on ({doc.asked!r}) is not the step about to run")
        return
    if doc.asked is not None:
        _refuse("it is marked ended but still waits on a question")
    if stop_reason == "success":
        if result.error is not None:
            _refuse("it is marked successful but its result holds an error")
        at, _, _ = walk(compiled, result.envelopes, result.decisions)
        if at < len(compiled):
            _refuse(f"it is marked successful but its path stops before the plan's end, at {compiled[at].name!r}")


def walk(
    compiled: tuple[StepShape, ...], envelopes: list[_Envelope], decisions: list[tuple[str | None, str]]
) -> tuple[int, int, int]:
    """Replay a recorded path through the graph of the plan of shape ``compiled``, as the interpreter moves:
    ``(index of the next step, index of the routing step whose rejoin is pending or -1, steps run)`` (a parallel
    band counts as one step).

    Routing predicates are not run: a decision is accepted when the plan's routing can make it at that point."""
    count = len(compiled)
    index = {c.name: c.index for c in compiled}
    at, pending, units, e, d = 0, -1, 0, 0, 0
    while e < len(envelopes):
        if at >= count:
            _refuse(f"its path goes on after the plan's last step, with {envelopes[e].s!r} (step {e + 1})")
        step = compiled[at]
        units += 1
        if step.band_end:
            for member in compiled[at : step.band_end]:
                env = envelopes[e] if e < len(envelopes) else None
                if env is None or env.s != member.name or env.e is not None:
                    _refuse(f"step {e + 1} of its path should be the parallel member {member.name!r}, finished")
                if d >= len(decisions) or decisions[d] != (None, "parallel band"):
                    _refuse(f"decision {d + 1} should record the parallel member {member.name!r}")
                e, d = e + 1, d + 1
            at = step.band_end
            continue
        env = envelopes[e]
        if env.s != step.name:
            _refuse(f"step {e + 1} of its path is {env.s!r}, where the plan's routing leads to {step.name!r}")
        if d >= len(decisions):
            _refuse(f"its path has no routing decision after {step.name!r} (step {e + 1})")
        target, why = decisions[d]
        e, d = e + 1, d + 1
        at, pending = _move(compiled, step, env, target, why, pending, index)
    if d != len(decisions):
        _refuse(f"it records {len(decisions)} routing decisions for a path that makes {d}")
    return at, pending, units


def _move(
    compiled: tuple[StepShape, ...],
    step: StepShape,
    env: _Envelope,
    target: str | None,
    why: str,
    pending: int,
    index: dict[str, int],
) -> tuple[int, int]:
    """Where the decision after ``step`` leads: ``(next index, pending rejoin)``, or a refusal."""
    failed = env.e is not None
    if failed and env.e is not None and env.e.stop_reason == INTERRUPTED:
        _refuse(f"its path goes on after {step.name!r} was interrupted")
    rejoin = compiled[pending].rejoin if pending >= 0 and not failed else -1
    if target is None:
        if failed:
            _refuse(f"its path goes on after {step.name!r} failed with no route taken")
        if rejoin >= 0:
            _refuse(f"its path leaves the branch {step.name!r} without its rejoin {compiled[rejoin].name!r}")
        return step.index + 1, -1
    to = index.get(target, -1)
    routes = step.routes if failed else step.routes | step.by_routes
    if to in routes and not (to == rejoin and why == compiled[pending].rejoin_why):
        return to, step.index if step.rejoin >= 0 and to != step.rejoin else -1
    if to >= 0 and to == rejoin:
        return to, -1
    _refuse(f"after {step.name!r} its path goes to {target!r}, which the plan's routing cannot choose there")


def _rejoin_text(compiled: tuple[StepShape, ...], pending: int) -> str:
    if pending < 0:
        return "none"
    rejoin = compiled[pending].rejoin
    return f"{compiled[pending].name!r} → {compiled[rejoin].name!r}" if rejoin >= 0 else f"{compiled[pending].name!r}"


__all__ = ["FORMATS", "check_checkpoint", "check_readable", "walk"]
