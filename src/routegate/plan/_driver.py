"""The driver: every run of every plan starts here, and here it ends.

:func:`drive` starts a run of its own — a plan's ``arun`` / ``run`` / ``iter``, and a runtime's doors
(:class:`routegate.plan.Runtime`): the run's context (a runtime's, made by its ``context`` hook or by the caller),
its deadline under the plan's budget, its spans, its checkpoint. :func:`drive_nested` starts a plain plan run as a
step of another run, inside that run's context, deadline and spans.

A run with nothing to watch — a plain plan with no budget, no step that asks for the context, no listener, no
checkpoint, and no tracer provider installed — is the lean branch: the interpreter alone, with no
:class:`~routegate.plan._run.RunState`. Every other run is a :class:`~routegate.plan._run.RunState`, driven by
:func:`_run` from its first step to its final event: spans begun, durable run opened, the interpreter under the
deadline's timer (``max_seconds`` cuts a waiting step off: :meth:`~routegate.plan._run.RunState.cut_off`), step
events flushed, checkpoint finished, then the run's result — the plan's own or its runtime's, made by ``finish`` —
its spans ended and its final event sent.

Whether a run is traced is read once: from its context when it has one (a runtime's always does), else by asking
:func:`~routegate.core.telemetry.tracer`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry.trace import Tracer

from routegate.core._deadline import Deadline
from routegate.core.context import RunContext
from routegate.core.contracts import Budget
from routegate.core.events import FinalEvent
from routegate.core.result import RunResult
from routegate.core.telemetry import spans_for, tracer
from routegate.errors import ConfigurationError
from routegate.plan._interpreter import Finish, interpret
from routegate.plan._run import RunState, deadline_after
from routegate.plan._spans import NO_SPANS, PLAN_SPAN, RunSpans, TracedSpans, plan_attributes
from routegate.plan.durable import NO_ANSWER, DurableRun, open_run
from routegate.plan.result import PlanResult

if TYPE_CHECKING:
    from routegate.plan.plan import Plan

R = TypeVar("R", bound=RunResult[Any])


def drive(
    plan: Plan[Any, Any],
    finish: Finish[R],
    value: Any,
    store: Any = None,
    *,
    deps: Any = None,
    emit: Callable[[Any], None] | None = None,
    key: str | None = None,
    answer: Any = NO_ANSWER,
    context: RunContext[Any] | None = None,
    own_deadline: bool = True,
) -> Coroutine[Any, Any, R]:
    """The coroutine of a run of ``plan`` on ``value``, ending with ``finish`` of how it ended.

    ``emit`` listens to the run (its step events, when the plan sends them, and its final event); ``key`` and
    ``answer`` make it durable (see :meth:`routegate.plan.Plan.arun`). ``context``: the caller started the run's
    context already (its deps, run id, ledgers, tracer and clock: the budget's deadline is ``context.deadline``);
    else a runtime's ``context`` hook starts it, and a plain plan starts one only when a step asks for it.
    ``own_deadline=False``: the run is a part of the run ``context`` belongs to, whose timer bounds it (no deadline,
    timer or events of its own)."""
    started = time.perf_counter()
    given = store  # a durable run's checkpoints go to the store the caller gave, not to a fresh one
    store = plan._store_for(store)
    runtime = plan.runtime
    budget = plan.budget
    ctx = context
    if ctx is None and runtime is not None:  # a runtime's run always has a context
        ctx = runtime.context(value, deps, emit)
    if ctx is not None:
        active = ctx.tracer  # the run's tracing, as its context says
    else:
        active = tracer()  # the run's one question about tracing
        if active is None and plan._lean and emit is None and key is None and answer is NO_ANSWER:
            return interpret(plan, None, value, store, started, finish)
        if plan._wants_ctx:
            ctx = start_context(deps, budget, emit, active)
    spans: RunSpans
    if active is None:
        spans = NO_SPANS
    elif runtime is not None:
        assert ctx is not None
        spans = runtime.spans(active, value, ctx)
    else:
        spans = TracedSpans(active, PLAN_SPAN, plan_attributes(plan.name))
    if budget is None or not own_deadline:
        deadline = max_seconds = None
    else:
        deadline = deadline_after(budget.max_seconds) if ctx is None else ctx.deadline
        max_seconds = budget.max_seconds
    if not own_deadline:
        emit = None  # a part of an outer run: its events are the outer run's
    step_events = runtime is None or runtime.step_events
    run = RunState(plan, value, store, ctx, deadline, max_seconds, emit, spans, step_events)
    timed = deadline is not None and not plan._all_sync
    return _run(run, started, finish, timed, key if key is not None else plan.checkpoint_key, answer, given)


def drive_nested(
    plan: Plan[Any, Any], value: Any, store: Any, outer: RunState | None
) -> Coroutine[Any, Any, PlanResult[Any]]:
    """The coroutine of a run of ``plan`` as a step of the run ``outer`` (``None``: a lean run): in its context,
    under its deadline (the outer run's timer cuts it off), with its spans; no events of its own."""
    started = time.perf_counter()
    if outer is None or not outer.shares():
        return interpret(plan, None, value, plan._store_for(store), started, plan._ended)
    spans = outer.spans.nested(plan.name)
    run = RunState(plan, value, plan._store_for(store), outer.ctx, outer.deadline, outer.max_seconds, None, spans)
    return _run(run, started, plan._ended, False, None, NO_ANSWER, None)


def start_context(
    deps: Any, budget: Budget | None, emit: Callable[[Any], None] | None, active: Tracer | None
) -> RunContext[Any]:
    """The context of a run starting now: under ``budget`` (its deadline and delegation ledger), or without a
    deadline when there is none; ``active`` is the run's tracer (``None``: untraced)."""
    if budget is None:
        return RunContext(deps, emit=emit, tracer=active, spans=spans_for(active))
    return RunContext.start(deps, budget, emit=emit, active=active)


async def _run(
    run: RunState, started: float, finish: Finish[R], timed: bool, key: str | None, answer: Any, given: Any
) -> R:
    """Drive ``run`` from its first step to its final event (see the module docstring).

    ``timed``: under the budget's timer — a step still running when the deadline passes is cancelled and the run
    ends with ``max_seconds``. ``key``: a durable run — take the key's lease, resume from its checkpoint (or answer
    from a finished one), checkpoint before every step, record how the run ended; ``given`` is the store the
    caller passed (where the checkpoints are)."""
    spans = run.spans
    tracing = spans.watching
    if tracing:
        spans.begin(run.envelopes, run.decisions)
    try:
        ended: PlanResult[Any] | None = None
        durable: DurableRun | None = None
        if key is not None:
            opened = _open(run, key, answer, given)
            if isinstance(opened, PlanResult):  # it finished before: nothing runs
                ended = opened
            else:
                durable = opened
        elif answer is not NO_ANSWER:
            raise ConfigurationError("answer= resumes a durable run: give the plan (or this run) a checkpoint_key")
        if ended is None:
            # under the budget's timer: a step still running when the deadline passes is cancelled
            timer = Deadline.until(run.deadline) if timed and run.deadline is not None else None
            try:
                if timer is not None:
                    timer.arm()
                try:
                    ended = await interpret(run.plan, run, run.input, run.store, started, _as_ended)
                except BaseException as exc:
                    if timer is None:
                        raise
                    cut = timer.disarm(type(exc) is asyncio.CancelledError)
                    if not (cut or (timer.expired and isinstance(exc, TimeoutError))):
                        raise  # not the deadline's: a cancellation from elsewhere, or a bug of the plan
                    ended = run.cut_off(started)  # the run ends with max_seconds, the cut-off step with it
                else:
                    if timer is not None:
                        timer.disarm(False)
                if run.events is not None:
                    run.flush()
            except BaseException as exc:
                if durable is not None:
                    durable.abort(exc)
                raise
            finally:
                if durable is not None:
                    durable.close()
            if durable is not None:
                durable.finish(ended)
        result = finish(ended, run.ctx)
    except BaseException as exc:  # a plan bug or a cancellation: the open spans end with it
        if tracing:
            spans.end(None, exc)
        raise
    if tracing:
        spans.end(result)
    if run.emit is not None:
        run.emit(FinalEvent(result))
    return result


def _as_ended(ended: PlanResult[Any], ctx: RunContext[Any] | None) -> PlanResult[Any]:
    """A watched run's ending, as it is: the driver finishes it once its checkpoint is recorded."""
    return ended


def _open(run: RunState, key: str, answer: Any, given: Any) -> DurableRun | PlanResult[Any]:
    """Open the durable run of ``key``: the run to drive, watched from now on, or the result of the run that
    already finished under it."""
    plan = run.plan
    backend, secret = plan._backend(given)
    opened = open_run(plan._shape(), backend, key, plan.resume, plan.on_concurrent, answer, run.store, secret)
    run.spans.resumed(isinstance(opened, PlanResult) or opened.state is not None)
    if not isinstance(opened, PlanResult):
        run.durable = opened
        run.watched = True
    return opened


__all__ = ["drive", "drive_nested", "start_context"]
