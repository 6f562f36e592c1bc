"""Time travel: a durable run re-run from one of its checkpoints as a new run (``Plan.fork``).

The checkpoint is rebuilt from the run's history (:mod:`routegate.plan.history`) and checked as any resumed one —
its signature when the store has a signing key, its plan's fingerprint, its walk of the plan's graph — so a
tampered historical checkpoint is refused. It becomes the latest checkpoint of a new key (re-keyed: its interrupt
answers and step keys are the new run's; maybe with an edited payload; naming its parent, checkpoint format 3),
and the new key is resumed through the one driver. The original run's rows are never written.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from routegate.core.contracts import jsonable
from routegate.core.stop_reasons import SUCCESS
from routegate.errors import ConfigurationError
from routegate.plan._compiled import ASYNC, CTX_ASYNC, CTX_SYNC, PREV, SYNC, Compiled
from routegate.plan._signature import sign
from routegate.plan.checkpoint import ENDED, INTERRUPTED, RUNNING, RunRecord
from routegate.plan.durable import NO_ANSWER, trust
from routegate.plan.errors import CheckpointConflictError
from routegate.plan.history import NO_PAYLOAD, checkpoint_record, fork_key, read_history
from routegate.plan.result import PlanResult

if TYPE_CHECKING:
    from routegate.plan.plan import Plan


async def fork(
    plan: Plan[Any, Any],
    key: str,
    at: int | None,
    step: str | None,
    payload: Any,
    answer: Any,
    store: Any,
    deps: Any,
    checkpoint_key: str | None,
) -> PlanResult[Any]:
    """Run ``plan`` from checkpoint ``at`` (or the latest about to run ``step``) of the run ``key``, as a new run
    (see the module docstring and :meth:`routegate.plan.Plan.fork`)."""
    if (at is None) == (step is None):
        raise ConfigurationError("fork() takes at= (a checkpoint's number) or step= (a step's name), one of them")
    if not plan.resume:
        raise ConfigurationError(
            f"fork() resumes a new run from a checkpoint, and {plan!r} was built with resume=False: build it with "
            "resume=True (the default) to fork its runs"
        )
    backend, secret = plan._backend(store)
    if at is None:
        assert step is not None
        at = read_history(backend, key).before(step).at
    origin = checkpoint_record(backend, key, at)
    shape = plan._shape()
    trust(shape, origin, secret)  # its signature, its plan, its walk of the graph: a tampered one is refused
    new = checkpoint_key if checkpoint_key is not None else fork_key(key, at)
    state = _forked(plan, origin, at, new, payload, answer)
    lease = backend.acquire(new)
    if lease is None:
        raise CheckpointConflictError(f"checkpoint_key {new!r} is held by a live run; give the fork another key")
    try:
        if backend.load(new) is not None:
            raise ConfigurationError(
                f"checkpoint_key {new!r} already holds a run; give the fork a key of its own (or none: one is made)"
            )
        if secret is not None:
            sign(secret, new, RUNNING, "", state)
        # the fork's latest checkpoint, where its run resumes; its history starts with that run's first checkpoint
        backend.save(new, RUNNING, "", state)
    finally:
        lease.release()
    return await plan.arun(None, store=store, deps=deps, checkpoint_key=new)


def _forked(plan: Plan[Any, Any], origin: RunRecord, at: int, new: str, payload: Any, answer: Any) -> dict[str, Any]:
    """The first checkpoint of the fork ``new`` of ``origin`` (checkpoint ``at`` of its run), unsigned."""
    key = origin.key
    if origin.status == ENDED and origin.stop_reason == SUCCESS:
        raise ConfigurationError(
            f"checkpoint {at} of {key!r} is the end of a successful run: nothing is left to run from it; fork an "
            f"earlier checkpoint (see `routegate plans history {key}`)"
        )
    state = {k: v for k, v in origin.state.items() if k not in ("result", "asked", "sig")}
    if origin.status == ENDED:  # a stopped run: its steps so far do not count against the fork's max_iterations
        state["allowance"] = state["iterations"]
    old = f"{key}/"
    answers = {f"{new}/{k[len(old) :]}": v for k, v in state.get("answers", {}).items() if k.startswith(old)}
    if answer is not NO_ANSWER:
        asked = origin.state.get("asked")
        if origin.status != INTERRUPTED or not isinstance(asked, str) or not asked.startswith(old):
            raise ConfigurationError(
                f"answer= answers the question a run paused on, and checkpoint {at} of {key!r} is {origin.status}, "
                "not a paused run's"
            )
        asked = f"{new}/{asked[len(old) :]}"
        answers[asked] = [*answers.get(asked, []), answer]
    state["answers"] = answers
    edited = payload is not NO_PAYLOAD
    if edited:
        _edit(plan, state, key, at, payload)
    state["parent"] = {"key": key, "at": at, "edited": edited}
    state["format"] = 3
    return state


def _edit(plan: Plan[Any, Any], state: dict[str, Any], key: str, at: int, payload: Any) -> None:
    """Hand ``payload`` to the step about to run in ``state`` instead of what the step before produced (or the
    run's input, before the first step), after checking it against both steps' types."""
    compiled: tuple[Compiled, ...] = plan._compiled
    index = {c.name: c for c in compiled}
    receiving = compiled[int(state["at"])]
    where = f"checkpoint {at} of {key!r}"
    if receiving.source != PREV:
        raise ConfigurationError(
            f"{where}: step {receiving.name!r} reads {receiving.step.context!r}, not the payload of the step before "
            "it; a payload= there would not reach it"
        )
    envelopes: list[dict[str, Any]] = list(state["envelopes"])
    producer = index.get(envelopes[-1]["s"]) if envelopes else None
    if producer is not None and envelopes[-1].get("e") is not None:
        raise ConfigurationError(
            f"{where}: step {receiving.name!r} receives the error of {producer.name!r}; payload= cannot replace an "
            "error"
        )
    if producer is not None and any(c.band_end and c.index <= producer.index < c.band_end for c in compiled):
        raise ConfigurationError(
            f"{where}: step {receiving.name!r} receives the payloads of a parallel band; payload= cannot replace them"
        )
    value = payload
    if producer is not None and producer.validate is not None:
        try:
            value = producer.validate(payload)
        except (ValidationError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"{where}: the payload does not validate as the output type of {producer.name!r}, which produced it: "
                f"{_first(exc)}"
            ) from None
    expected = _input_type(receiving.fn) if receiving.kind in (SYNC, ASYNC, CTX_SYNC, CTX_ASYNC) else None
    if expected is not None:
        try:
            TypeAdapter(expected).validate_python(value)
        except ValidationError as exc:
            raise ConfigurationError(
                f"{where}: the payload is not a {getattr(expected, '__name__', expected)!s}, the input type of "
                f"step {receiving.name!r}: {_first(exc)}"
            ) from None
    stored = jsonable(value)
    state["band"] = {}  # members that finished on the old payload run again on the new one
    state["prev"] = {"v": stored}
    if producer is None:
        state["input"] = stored
        return
    envelopes[-1] = {**envelopes[-1], "p": stored}
    state["envelopes"] = envelopes
    if producer.writes is not None:
        state["store"] = {**state.get("store", {}), producer.writes: stored}


def _input_type(fn: Callable[..., Any]) -> Any:
    """The annotated type of ``fn``'s first parameter (its input payload), or ``None`` (none, or not resolvable)."""
    try:
        hints = typing.get_type_hints(fn)
        first = next(iter(inspect.signature(fn).parameters.values()), None)
    except Exception:  # a forward reference that does not resolve, a builtin without a signature
        return None
    if first is None or first.name not in hints or hints[first.name] is Any:
        return None
    return hints[first.name]


def _first(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error.get("loc", ())) or "the payload"
        return f"{where}: {error.get('msg', 'invalid')}"
    return str(exc)


__all__ = ["fork"]
