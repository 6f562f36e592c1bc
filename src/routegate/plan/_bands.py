"""Parallel bands: consecutive ``parallel=True`` steps run concurrently on the same inputs, all or nothing.

Each member is one :func:`~routegate.plan._call.call_step`, under its own step span when the run is traced. The
band's writes apply only when every member succeeded. In a durable run each member that succeeds is checkpointed
at once (with its own idempotency key, :func:`routegate.plan.step_key`), and a resumed band runs only the members
that had not succeeded.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from typing import Any

from routegate.core.telemetry import record_stop
from routegate.plan._call import call_step
from routegate.plan._compiled import PREV, START, Compiled
from routegate.plan._inputs import from_step
from routegate.plan._position import Decision
from routegate.plan._run import RunState
from routegate.plan.durable import _SCOPE, DurableRun
from routegate.plan.envelope import Envelope, ErrorInfo


async def run_band(
    members: Sequence[Compiled],
    prev: Any,
    value: Any,
    store: Any,
    run: RunState | None,
    latest: list[Envelope | None] | None,
    envelopes: list[Envelope],
    decisions: list[Decision],
) -> tuple[Any, ErrorInfo | None]:
    """Run the band ``members``: every member concurrently on its input; apply their writes only if all succeed.
    Returns the next step's input (the members' payloads by name) and the band's stop (its first failed member's),
    or the band's input unchanged with that stop."""
    inputs = [
        prev if m.source == PREV else value if m.source == START else from_step(m, latest, envelopes) for m in members
    ]
    durable = None if run is None else run.durable
    if durable is not None:
        results = await _durable_band(members, inputs, run, store, durable)
    elif members[0].band_sync:  # nothing to wait for: in declared order, one after the other
        results = [await _member(m, given, run, store) for m, given in zip(members, inputs, strict=True)]
    else:
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(_member(m, given, run, store)) for m, given in zip(members, inputs, strict=True)
                ]
        except BaseExceptionGroup as failed:  # only PlanRuntimeError (and BaseExceptions) escape a member
            raise _first_leaf(failed) from None
        results = [task.result() for task in tasks]
    error: ErrorInfo | None = None
    for env in results:
        envelopes.append(env)
        if env.error is not None and error is None:
            error = env.error
            decisions.append((None, "error"))
        else:
            decisions.append((None, "parallel band"))
    if error is not None:
        return prev, error  # atomic: no writes from any member
    joined: dict[str, Any] = {}
    for m, env in zip(members, results, strict=True):
        joined[m.name] = env.payload
        if latest is not None:
            latest[m.index] = env
        if m.writes is not None:
            store.write(m.writes, env.payload)
    return joined, None


async def _durable_band(
    members: Sequence[Compiled], inputs: list[Any], run: RunState | None, store: Any, durable: DurableRun
) -> list[Envelope]:
    """A band of a durable run: members that finished before a crash are not run again; each member runs with
    its own idempotency key and is checkpointed as soon as it succeeds."""

    async def one(m: Compiled, given: Any) -> Envelope:
        done = durable.band_done(m.name)
        if done is not None:
            return done
        env = await _member(m, given, run, store)
        durable.member_finished(env)
        return env

    pairs = list(zip(members, inputs, strict=True))
    if members[0].band_sync:
        results = []
        for m, given in pairs:
            token = _SCOPE.set(durable.member_scope(m.name))
            try:
                results.append(await one(m, given))
            finally:
                _SCOPE.reset(token)
        return results
    try:
        async with asyncio.TaskGroup() as group:
            tasks = []
            for m, given in pairs:
                context = contextvars.copy_context()
                context.run(_SCOPE.set, durable.member_scope(m.name))
                tasks.append(group.create_task(one(m, given), context=context))
    except BaseExceptionGroup as failed:
        raise _first_leaf(failed) from None
    return [task.result() for task in tasks]


async def _member(step: Compiled, given: Any, run: RunState | None, store: Any) -> Envelope:
    """Run a band member (under its own step span when the run is traced)."""
    if run is None:
        return await call_step(step, given, run, store)
    with run.spans.member(step.name) as member:
        env = await call_step(step, given, run, store)
        if env.error is not None and member.is_recording():
            record_stop(member, env.error.stop_reason)
        return env


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


__all__ = ["run_band"]
