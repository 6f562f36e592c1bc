"""The interpreter: the one loop every run of every plan goes through.

Per step: (a watched run only) what the run watches between steps — checkpoint, step events, deadline, span
(:meth:`~routegate.plan._run.RunState.between`); the step's input; its call (:func:`~routegate.plan._call.call_step`,
or a parallel band's, :func:`~routegate.plan._bands.run_band`); its writes; then its routing — ``routes=`` (the
first predicate that holds), ``routes_by=`` (the output's field names the step), the pending rejoin of an exclusive
branch (``after_branches=``), else the next step in declared order. A run ends after the last step, on a failed
step no route caught, or when it used up ``max_iterations``.

A lean run (``run`` is ``None``: the driver found nothing to watch) keeps its path in the loop's own lists and
runs its steps back to back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from routegate.core.context import RunContext
from routegate.plan._bands import run_band
from routegate.plan._call import call_step
from routegate.plan._compiled import PREV, START, Compiled
from routegate.plan._inputs import from_step
from routegate.plan._position import Decision
from routegate.plan._run import RunState, iterations_stop
from routegate.plan._spans import NO_SPANS, RunSpans
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import INTERRUPTED, PlanRuntimeError
from routegate.plan.result import PlanResult
from routegate.plan.when import _MISSING, read_field

if TYPE_CHECKING:
    from routegate.plan.plan import Plan

R = TypeVar("R")
Finish = Callable[[PlanResult[Any], RunContext[Any] | None], R]
"""What a run's ending (in its context, if it has one) becomes: the plan's own result (logged), or its runtime's
(``Runtime.result``, logged)."""


async def interpret(
    plan: Plan[Any, Any], run: RunState | None, value: Any, store: Any, started: float, finish: Finish[R]
) -> R:
    """Run ``plan``'s steps on ``value`` from the first (or a durable run's checkpoint) until the plan ends or
    stops, in ``run`` (``None``: the lean branch); return ``finish`` of how it ended (the plan's own result: a lean
    run's result, or what the driver finishes a watched run with)."""
    compiled = plan._compiled
    names = plan._names
    count = len(compiled)
    limit = plan.max_iterations
    envelopes: list[Envelope]
    decisions: list[Decision]
    spans: RunSpans
    if run is None:
        envelopes, decisions, spans, durable, watched = [], [], NO_SPANS, None, False
    else:
        envelopes, decisions, spans, durable, watched = (
            run.envelopes,
            run.decisions,
            run.spans,
            run.durable,
            run.watched,
        )
    latest: list[Envelope | None] | None = [None] * count if plan._uses_from_step else None
    prev: Any = value
    error: ErrorInfo | None = None
    iterations = i = 0
    # the rejoin point of the exclusive branch being entered: the routed-to step always runs next, so one pending
    # rejoin suffices; it is consumed when that step completes
    rejoin_next: Compiled | None = None
    if durable is not None:
        assert run is not None
        start = durable.restore(value, store)
        value, i, prev, iterations = durable.input, start.at, start.prev, start.iterations
        rejoin_next = compiled[start.rejoin] if start.rejoin >= 0 else None
        envelopes.extend(start.envelopes)
        decisions.extend(start.decisions)
        if latest is not None:
            index = {name: k for k, name in enumerate(names)}
            for env in start.envelopes:
                latest[index[env.step or ""]] = env
        limit += durable.allowance
        run.input = value
    while True:
        step = compiled[i]
        if iterations == limit:
            if run is not None and durable is not None:  # the resume point of the stopped run: the step it did not run
                run.checkpoint(step, prev, iterations, rejoin_next)
            error = iterations_stop(limit, [env.step or "" for env in envelopes], step.name)
            break
        if watched:
            assert run is not None
            error = run.between(step, prev, iterations, rejoin_next)
            if error is not None:
                break
        iterations += 1
        if step.band_end:
            members = compiled[i : step.band_end]
            prev, error = await run_band(members, prev, value, store, run, latest, envelopes, decisions)
            if error is not None:
                break
            i = step.band_end
            if i >= count:
                break
            continue

        source = step.source
        given = prev if source is PREV else value if source is START else from_step(step, latest, envelopes)
        env = await call_step(step, given, run, store)
        envelopes.append(env)
        if latest is not None:
            latest[i] = env
        out, err = env.payload, env.error
        if err is None:
            if step.writes is not None:
                store.write(step.writes, out)
        elif err.stop_reason == INTERRUPTED:  # a question for a person: no route may catch it
            decisions.append((None, INTERRUPTED))
            error = err
            break

        # -- routing: routes= (the first predicate that holds) / routes_by=, then the rejoin of an exclusive
        # branch, then linear ------------------------------------------------------------------------------------
        target = -1
        why = ""
        routes = step.routes
        if routes is not None:
            for target_index, predicate, description, target_name in routes:
                try:
                    hit = predicate(env)
                except Exception as exc:
                    raise _predicate_error(step, target_name, exc, err) from exc
                if hit:
                    target, why = target_index, description
                    break
        elif step.by_field is not None and err is None:
            chosen = read_field(out, step.by_field)
            found = step.by_map.get(chosen) if isinstance(chosen, str) else None
            if found is not None:
                target, why = found, step.by_why[chosen]
        pending, rejoin_next = rejoin_next, None
        if target >= 0:
            if step.rejoin >= 0 and target != step.rejoin:
                rejoin_next = step
            decisions.append((names[target], why))
            prev = out if err is None else err
            i = target
            continue
        if err is not None:
            decisions.append((None, "error"))
            error = err
            break
        prev = out
        if pending is not None:
            i = pending.rejoin
            decisions.append((names[i], pending.rejoin_why))
            continue
        i += 1
        if i >= count:
            decisions.append(step.why_end if step.by_field is None else (None, _by_miss(step, out, "end")))
            break
        decisions.append(step.why_linear if step.by_field is None else (None, _by_miss(step, out, "linear")))
    if spans.watching:
        spans.finish(iterations)
    ctx = None if run is None else run.ctx
    run_id = None if ctx is None else ctx.run_id  # a run without a context gets its id when it is read
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    payload = None if error is not None else prev
    return finish(PlanResult(value, payload, error, envelopes, decisions, store, elapsed_ms, run_id), ctx)


def _predicate_error(step: Compiled, target: str, exc: Exception, err: ErrorInfo | None) -> PlanRuntimeError:
    note = ""
    if err is not None:  # raised to the plan's author, who gets the step's own exception text
        detail = err.message if err.exception is None else str(err.exception)
        note = (
            f" (the step itself failed with {err.type}: {detail}; put when.errored() first in routes= "
            "to route failures)"
        )
    return PlanRuntimeError(
        f"Step {step.name!r}: routes predicate for target {target!r} raised {type(exc).__name__}: {exc}{note}"
    )


def _by_miss(step: Compiled, out: Any, then: str) -> str:
    chosen = read_field(out, step.by_field or "")
    if chosen is _MISSING or chosen is None:
        return f"routes_by {step.by_field}=None; {then}"
    return f"routes_by {step.by_field}={chosen!r} is not a step; {then}"


__all__ = ["interpret"]
