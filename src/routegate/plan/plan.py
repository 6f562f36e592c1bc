"""``Plan``: a declared list of steps with explicit, validated routing between them.

Everything is worked out when the plan is built (step index, route tables, predicate lists, target kinds,
validators, which steps ask for the run's :class:`~routegate.core.RunContext`), so a run is a tight loop: resolve
the step's input, call its target, wrap the output in an :class:`Envelope`, pick the next step. In a runtime
built as a prebuilt plan (``_returns_stops``), a step that returns a :class:`~routegate.errors.RunStopError`
instead of raising it ends the run exactly as if it had raised it (the same error, routing, path and trace),
without the cost of raising: the runtimes end their runs on a refusal that way.

One driver, :meth:`Plan._drive`, starts every run — ``arun``, ``run`` (through the one sync bridge,
:func:`routegate.core._sync.run_sync`, which drives a plan of synchronous steps without an event loop), ``iter``
(and its deprecated alias ``astream``, streaming through :func:`routegate.core._stream.stream_events`), a plan
nested as a step and a runtime built as a prebuilt plan (the technique dispatcher), which hands it the run's
context. A run with nothing to watch is its lean branch: the interpreter, :meth:`Plan._steps`, alone.
Any other run is a :class:`_Run`; the untraced run of a prebuilt plan whose result ignores the path (the routing
agent's) takes the interpreter's pathless branch, which builds no envelopes or routing decisions and keeps only
the names of the steps run. A :class:`_Run` owns the run's context, deadline (:meth:`_Run.out_of_time` is the one
place a deadline becomes ``max_seconds``), spans, checkpoint and final event. The run's position between steps is
a :class:`~routegate.plan._position.Position` when a durable run checkpoints it; otherwise it stays in the
interpreter's locals.

The driver asks once per run whether a tracer provider is installed; with one, the run is a ``routegate.plan``
span with a ``routegate.step`` span per step (:mod:`routegate.plan._spans`), and without one it opens none.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Mapping
from typing import Any, Generic

from opentelemetry.trace import Tracer

from routegate._lazy import renamed_method
from routegate.core._deadline import Deadline
from routegate.core._stream import stream_events
from routegate.core._sync import run_sync
from routegate.core.context import RunContext, RunDepsT
from routegate.core.contracts import Budget
from routegate.core.events import FinalEvent
from routegate.core.result import OutputT
from routegate.core.stop_reasons import MAX_ITERATIONS, MAX_SECONDS
from routegate.core.telemetry import record_stop, spans_for, tracer
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan._compiled import (
    ASYNC,
    BAND,
    CTX_ASYNC,
    CTX_SYNC,
    PREV,
    PROTO_ASYNC,
    START,
    STEP,
    SYNC,
    Compiled,
    compile_steps,
    is_sync,
    shape_of,
    wants_context,
)
from routegate.plan._position import Decision, Position
from routegate.plan._shape import PlanShape
from routegate.plan._spans import NO_SPANS, RunSpans, TracedSpans
from routegate.plan.durable import _SCOPE, NO_ANSWER, DurableRun, open_run
from routegate.plan.envelope import Envelope, ErrorInfo, StepFailedError
from routegate.plan.errors import INTERRUPTED, MaxIterationsExceeded, PlanCompileError, PlanRuntimeError
from routegate.plan.events import PlanEvent, StepEvent
from routegate.plan.result import PlanResult
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import StepContext
from routegate.plan.when import _MISSING, read_field

_logger = logging.getLogger(__name__)
_INFO = logging.INFO
_perf = time.perf_counter
_monotonic = time.monotonic
_NEVER = float("inf")  # the deadline of a run without one: the clock never reaches it
_CoroutineType = types.CoroutineType
_new = object.__new__
_DEFAULT_ITERATIONS = Budget().max_iterations


class Plan(Generic[RunDepsT, OutputT]):
    """A plan: ``Plan(Step(...), Step(...), ..., budget=Budget(...))``; validated here, run with ``arun``/``run``.

    Generic over the ``deps`` its runs take and the output of its last step, for the type checker:
    ``Plan[MyDeps, Answer](...)`` runs take ``deps: MyDeps`` and return a ``PlanResult[Answer]`` whose ``output``
    is ``Answer | None``. Unsubscripted, both are ``Any`` (steps are not checked against either).

    * ``budget`` — a :class:`~routegate.core.Budget`: ``max_seconds`` is the run's deadline (a step still running
      when it passes is cut off and the run stops with ``max_seconds``) and ``max_iterations`` the most steps one
      run may execute (a parallel band counts once; a run that needs more stops with ``max_iterations``, the
      safety net for routing loops). Without a budget a run has no deadline and at most 100 steps.
    * ``max_iterations`` — shorthand for ``budget=Budget(max_iterations=...)``'s step bound, without a deadline.
    * ``store`` — the :class:`~routegate.plan.Store` that ``writes=`` go to (a run may pass its own); without
      one, a plan whose steps write gets a fresh store per run, returned as ``result.store``.
    * ``strict`` — the detour trap (a forward route without ``after_branches=`` to a step that is not the last)
      is a :class:`PlanCompileError` instead of a :class:`DetourTrapWarning`.
    * ``targets`` — what string targets name: ``Step("search")`` runs ``targets["search"]``.
    * ``name`` — the step name this plan gets when nested in another plan.
    * ``checkpoint_key`` — makes runs durable: a checkpoint after every step in ``store``'s backend
      (``Store()`` in memory, ``Store(db="plans.sqlite")``, ``Store(db="postgresql://...")``); a run may pass its
      own key. ``resume`` (default ``True``) continues the key's last run where it stopped; ``on_concurrent``
      says what a run does when a live run holds its key: ``"fail"`` (default) or ``"fork"``. See docs/plan.md,
      "Durable runs".

    Construction raises :class:`PlanCompileError` for any invalid graph, before anything runs.
    """

    def __init__(
        self,
        *steps: Step,
        max_iterations: int | None = None,
        budget: Budget | None = None,
        store: Any = None,
        strict: bool = False,
        name: str | None = None,
        targets: Mapping[str, Any] | None = None,
        checkpoint_key: str | None = None,
        resume: bool = True,
        on_concurrent: str = "fail",
    ) -> None:
        if not steps:
            raise PlanCompileError("a Plan needs at least one Step")
        for index, step in enumerate(steps):
            if not isinstance(step, Step):
                raise PlanCompileError(
                    f"Plan arguments must be Step objects; argument {index} is {step!r} (wrap it: Step(x, name=...))"
                )
        if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1
        ):
            raise PlanCompileError(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
        if budget is not None:
            if not isinstance(budget, Budget):
                raise PlanCompileError(f"budget= must be a routegate.core.Budget, got {budget!r}")
            if max_iterations is not None and max_iterations != budget.max_iterations:
                raise PlanCompileError(
                    f"max_iterations={max_iterations} disagrees with budget.max_iterations={budget.max_iterations}; "
                    "give the bound once: Budget(max_iterations=...)"
                )
        if store is not None and not callable(getattr(store, "write", None)):
            raise PlanCompileError(f"store= must have a write(key, value) method (a Store), got {store!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise PlanCompileError(f"Plan name= must be a non-empty string, got {name!r}")
        if checkpoint_key is not None and (not isinstance(checkpoint_key, str) or not checkpoint_key):
            raise PlanCompileError(f"checkpoint_key= must be a non-empty string, got {checkpoint_key!r}")
        if on_concurrent not in ("fail", "fork"):
            raise PlanCompileError(f"on_concurrent= must be 'fail' or 'fork', got {on_concurrent!r}")
        if not isinstance(resume, bool):
            raise PlanCompileError(f"resume= must be True or False, got {resume!r}")
        self.checkpoint_key = checkpoint_key
        self.resume = resume
        self.on_concurrent = on_concurrent
        self._checkpoints: Store | None = None  # the in-memory checkpoints of a durable plan without a Store
        self._checkpoint_shape: PlanShape | None = None  # what checkpoints know of the steps; on the first durable run
        self.steps: tuple[Step, ...] = steps
        self.budget = budget
        if budget is not None:
            self.max_iterations = budget.max_iterations
        else:
            self.max_iterations = _DEFAULT_ITERATIONS if max_iterations is None else max_iterations
        self.store = store
        self.strict = strict
        self.name = name
        self._compiled = compile_steps(steps, targets, strict, Plan)
        self._names = tuple(step.name for step in steps)
        self._has_writes = any(step.writes is not None for step in steps)
        self._uses_from_step = any(c.source >= STEP for c in self._compiled)
        self._all_sync = all(is_sync(c) for c in self._compiled)
        self._wants_ctx = any(wants_context(c) for c in self._compiled)
        # no budget and no step that asks for the context: the driver's lean branch (the interpreter alone)
        self._lean = budget is None and not self._wants_ctx and checkpoint_key is None
        # a deadline timer that can cut off a running step; a plan of synchronous steps never yields, so a timer
        # could not fire before the run ended: its deadline is checked between steps only
        self._timed_runs = budget is not None and not self._all_sync
        # what a prebuilt plan (a routing runtime: routegate.plan.agent) sets to its own: the result its runs end
        # with (called as PlanResult is), the logger of its one log line, and whether a streamed run sends a
        # StepEvent per step (a runtime's stream carries its own events, then the final event)
        self._result_type: Callable[..., Any] = PlanResult
        # a runtime's steps (async, the run's context second) may end the run by returning its RunStopError
        # instead of raising it: the run ends exactly as if it had been raised (the same ErrorInfo, routing, path
        # and trace), without the cost of raising (~1-2 µs a refusal). Only a prebuilt plan turns it on: in a
        # user's plan a returned RunStopError stays a step's output, and no step pays for the check
        self._returns_stops = False
        self._logger = _logger
        self._step_events = True
        # what a prebuilt plan whose result ignores the path turns on (_keep_no_path): its runs that nobody watches
        # step by step take the interpreter's pathless branch
        self._pathless = False

    def _keep_no_path(self) -> None:
        """Let this prebuilt plan's runs keep no path: its result type ignores the envelopes and decisions it is
        given. A run of it that is neither traced nor durable then takes the interpreter's pathless branch — a
        step's outcome goes straight to its routing (a step with ``routes=`` hands its predicates an envelope
        without timing), and only the names of the steps run are kept, for a stop's message. Only a plan that
        returns its stops (``_returns_stops``), sends no step events and whose every step is an async target
        taking the run's context second, reading the previous payload, with no ``output=``, ``writes=``,
        ``routes_by=`` or ``after_branches=`` takes it; any other keeps its path."""
        self._pathless = (
            self._returns_stops
            and not self._step_events
            and all(
                c.awaits_with_context
                and c.source == PREV
                and c.validate is None
                and c.writes is None
                and c.by_field is None
                and c.rejoin < 0
                and not c.band_end
                for c in self._compiled
            )
        )

    @property
    def step_names(self) -> tuple[str, ...]:
        return self._names

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Plan({label}steps={list(self._names)}, max_iterations={self.max_iterations})"

    # -- public API: three doors into the one driver -----------------------------------------------------------
    async def arun(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> PlanResult[OutputT]:
        """Run the plan on ``payload`` (the first step's input) and return how it ended.

        ``deps`` becomes ``ctx.deps`` of every step that declares a :class:`~routegate.core.RunContext` parameter.
        ``checkpoint_key`` makes this run durable under that key (default: the plan's); ``answer`` resumes an
        interrupted durable run, handing the answer to the step that asked (see :func:`routegate.plan.interrupt`).
        When resuming, ``payload`` may be ``None``: the checkpointed input is used.
        """
        return await self._drive(payload, store, deps, None, checkpoint_key, answer)

    def run(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> PlanResult[OutputT]:
        """Synchronous :meth:`arun` (not from inside a running event loop), through the one sync bridge.

        A plan whose targets are all synchronous never suspends, so the bridge drives it right here with no event
        loop; the deadline of its budget is then checked between steps (a running synchronous step cannot be cut
        off). Any other plan runs on the per-thread loop of :func:`routegate.core._sync.run_sync`.
        """
        return run_sync(self._drive(payload, store, deps, None, checkpoint_key, answer), "run", self._all_sync)

    def iter(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> AsyncIterator[PlanEvent]:
        """Run the plan, yielding a :class:`~routegate.plan.StepEvent` per executed step as its routing is
        decided, then a :class:`~routegate.core.FinalEvent` with the result. Closing the iterator early
        cancels the run."""

        def start(emit: Callable[[PlanEvent], None]) -> Coroutine[Any, Any, PlanResult]:
            return self._drive(payload, store, deps, emit, checkpoint_key, answer)

        return stream_events(start, _is_final)

    astream = renamed_method(iter, "Plan", "astream")

    # -- the driver --------------------------------------------------------------------------------------------
    def _drive(
        self,
        value: Any,
        store: Any,
        deps: Any = None,
        emit: Callable[[PlanEvent], None] | None = None,
        key: str | None = None,
        answer: Any = NO_ANSWER,
        nested: bool = False,
        outer: _Run | None = None,
        context: RunContext[Any] | None = None,
        root: Callable[[Tracer], RunSpans] | None = None,
        within: RunContext[Any] | None = None,
    ) -> Coroutine[Any, Any, PlanResult]:
        """The one driver: every run of the plan starts here, and this returns the coroutine that runs it.

        A ``nested`` run is a step of the run ``outer`` (``None``: a lean run). A run ``within`` a context is a
        part of the run that context belongs to (a routing agent run as a step): it runs in that context, with no
        deadline or events of its own (the outer run's timer cuts it off).
        A run given its ``context`` is the run of a runtime built as a prebuilt plan (the technique dispatcher,
        the support desk): the runtime made the context (its ``deps``, ``run_id``, deadline, ledgers and tracer)
        and the plan's budget bounds the run, on the context's clock; ``root`` makes the run's spans when it is
        traced (the runtime's own root span; without it, the plan's own spans).
        A run with nothing to watch — no tracer provider, listener, budget, checkpoint or step that asks for
        the context (for a nested plan: an outer run with none of them) — is the lean branch: the interpreter
        alone, with no :class:`_Run`. Every other run is a :class:`_Run`, which owns its context, deadline,
        spans, checkpoint and final event.
        """
        started = _perf()
        given = store  # a durable run's checkpoints go to the store the caller gave, not to a fresh one
        if store is None:
            store = self.store
            if store is None and self._has_writes:
                store = Store()
        if nested:  # a step of another plan: its context, deadline and spans; no events of its own
            if outer is None or not outer.shares():
                return self._steps(value, store, None, started)
            run = _Run(self, value, store, outer.ctx, outer.deadline, outer.max_seconds, None, outer.spans.nested())
            return run.drive(started)
        if within is not None:
            active = within.tracer
            inside = NO_SPANS if active is None else self._run_spans(active)
            return _Run(self, value, store, within, None, None, None, inside).drive(started)
        # the run's one question about tracing (a runtime's context has its answer): its spans follow from it
        tr = tracer() if context is None else context.tracer
        if tr is None:
            if self._lean and emit is None and key is None and answer is NO_ANSWER and context is None:
                return self._steps(value, store, None, started)
            spans: RunSpans = NO_SPANS
        else:
            spans = self._run_spans(tr) if root is None else root(tr)
        budget = self.budget
        if context is not None:  # a runtime's run: its context, under the plan's budget
            limit = None if budget is None else budget.max_seconds
            run = _Run(self, value, store, context, None if limit is None else context.deadline, limit, emit, spans)
            return run.drive(started, self._timed_runs, key if key is not None else self.checkpoint_key, answer, given)
        if budget is None:
            ctx = RunContext(deps, emit=emit, tracer=tr, spans=spans_for(tr)) if self._wants_ctx else None
            run = _Run(self, value, store, ctx, None, None, emit, spans)
        elif self._wants_ctx:  # the context's deadline is the run's
            ctx = RunContext.start(deps, budget, emit=emit, active=tr)
            run = _Run(self, value, store, ctx, ctx.deadline, budget.max_seconds, emit, spans)
        else:
            max_seconds = budget.max_seconds
            run = _Run(self, value, store, None, _monotonic() + max_seconds, max_seconds, emit, spans)
        return run.drive(started, self._timed_runs, key if key is not None else self.checkpoint_key, answer, given)

    def _run_spans(self, active: Tracer) -> RunSpans:
        """The spans of a traced run: ``routegate.plan`` and a ``routegate.step`` per step (a prebuilt plan may
        open its runtime's own)."""
        return TracedSpans(active)

    def _backend(self, store: Any) -> tuple[Any, bytes | None]:
        """The checkpoint backend of a durable run and the key that signs its checkpoints: its store's, else the
        plan's, else one in this process (unsigned)."""
        for candidate in (store, self.store):
            if candidate is not None:
                backend = getattr(candidate, "checkpoints", None)
                if backend is None:
                    raise ConfigurationError(
                        f"a durable run keeps its checkpoints in a routegate.plan.Store; {candidate!r} is not one "
                        "(pass store=Store(db=...))"
                    )
                secret = getattr(candidate, "signing_key", None)
                return backend, secret if isinstance(secret, bytes) else None
        if self._checkpoints is None:
            self._checkpoints = Store()
        return self._checkpoints.checkpoints, None

    def _shape(self) -> PlanShape:
        """What a durable run's checkpoints know of this plan (built on its first durable run)."""
        shape = self._checkpoint_shape
        if shape is None:
            shape = self._checkpoint_shape = shape_of(self._compiled)
        return shape

    def _ended(
        self,
        value: Any,
        payload: Any,
        error: ErrorInfo | None,
        envelopes: list[Envelope],
        decisions: list[Decision],
        store: Any,
        started: float,
        run_id: str | None = None,
    ) -> PlanResult:
        """The result of a run and its log line (the interpreter's end repeats this inline, for speed)."""
        elapsed_ms = (_perf() - started) * 1000.0
        result: PlanResult = self._result_type(value, payload, error, envelopes, decisions, store, elapsed_ms, run_id)
        if self._logger.isEnabledFor(_INFO):
            self._log(result)
        return result

    def _log(self, result: PlanResult) -> None:
        """The one log line of a run."""
        _logger.info(
            "plan %s path=%s stop_reason=%s latency_ms=%.3f",
            self.name or "-",
            ">".join(result.path),
            result.stop_reason,
            result.elapsed_ms,
        )

    # -- the interpreter -------------------------------------------------------------------------------------
    async def _steps(self, value: Any, store: Any, run: _Run | None, started: float) -> PlanResult:
        """Run steps from the first (or a durable run's checkpoint) until the plan ends or stops; return how it
        ended.

        ``run`` is ``None`` on the driver's lean branch; otherwise the interpreter appends to its path, keeps
        ``run.at`` on the running step and, when the run is watched, checkpoints, emits step events, checks the
        deadline and moves the step spans between steps. A pathless run (``run.walked`` is a list, see
        :meth:`_keep_no_path`) takes its own branch: between steps only the iteration bound and the deadline, per
        step the call, its stop and its routing; its path is the names in ``run.walked``.
        """
        compiled = self._compiled
        limit = self.max_iterations
        ctx: Any  # the run's context: the second argument of a step that takes it
        deadline: float | None
        error: ErrorInfo | None = None
        prev: Any = value
        if run is not None and (walked := run.walked) is not None:
            # the pathless branch (see _keep_no_path): per step the deadline, the call and the routing, nothing else;
            # it goes from a step to the one after it (or the one its routes= chose), to the end of the plan
            ctx = run.ctx
            deadline = _NEVER if run.deadline is None else run.deadline
            left = limit  # the steps the run may still take
            running: Compiled | None = compiled[0]
            while running is not None:
                if not left:
                    error = _iterations_stop(limit, walked, running.name)
                    break
                if _monotonic() >= deadline:
                    error = run.out_of_time(running.index)
                    break
                run.at = running.index
                left -= 1
                try:
                    out = await running.fn(prev, ctx)
                    err = (
                        ErrorInfo.from_exception(out, running.name, running.phase)
                        if isinstance(out, RunStopError)
                        else None
                    )
                except PlanRuntimeError:
                    raise
                except Exception as exc:
                    err = ErrorInfo.from_exception(exc, running.name, running.phase)
                walked.append(running.name)  # once it ran, as an envelope is appended (a cut-off step is not)
                if running.routes is not None and (err is None or err.stop_reason != INTERRUPTED):
                    target = _routed(running, Envelope(out if err is None else None, err, None, running.name), err)
                    if target >= 0:
                        prev = out if err is None else err
                        running = compiled[target]
                        continue
                if err is not None:
                    error = err
                    break
                prev = out
                running = running.following
            # what _ended does, inline (as at the end of the general loop below): one call less on every run
            payload = None if error is not None else prev
            elapsed_ms = (_perf() - started) * 1000.0
            ended: PlanResult = self._result_type(value, payload, error, [], [], store, elapsed_ms, ctx.run_id)
            if self._logger.isEnabledFor(_INFO):
                self._log(ended)
            return ended
        names = self._names
        count = len(compiled)
        iterations = 0
        i = 0
        durable: DurableRun | None
        emit: Callable[[PlanEvent], None] | None
        spans: RunSpans
        envelopes: list[Envelope]
        decisions: list[Decision]
        if run is None:  # the lean branch: no deadline, listener, checkpoints or spans to watch
            envelopes, decisions = [], []
            ctx = deadline = durable = emit = None
            spans = NO_SPANS
            watched = False
        else:
            ctx = run.ctx
            envelopes, decisions, deadline, emit, spans = (
                run.envelopes,
                run.decisions,
                run.deadline,
                run.events,
                run.spans,
            )
            durable, watched = run.durable, run.watched
        tracing = spans.watching  # step spans to move between steps (a no-op call per step costs ~0.1 µs)
        returns_stops = self._returns_stops
        latest: list[Envelope | None] | None = [None] * count if self._uses_from_step else None
        # the rejoin point of the exclusive branch being entered: the routed-to step always runs next, so one
        # pending rejoin suffices; it is consumed when that step completes
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
            if iterations == limit:
                if durable is not None:  # the resume point of the stopped run: the step it did not run
                    durable.save(Position(i, prev, iterations, _rejoin(rejoin_next), envelopes, decisions), store)
                error = _iterations_stop(limit, [env.step or "" for env in envelopes], names[i])
                break
            step = compiled[i]
            if watched:
                assert run is not None
                if durable is not None:
                    durable.save(Position(i, prev, iterations, _rejoin(rejoin_next), envelopes, decisions), store)
                if emit is not None:
                    run.flush()
                if deadline is not None and _monotonic() >= deadline:
                    error = run.out_of_time(i)
                    break
                run.at = i
                if tracing:
                    spans.step(step, iterations + 1)
            iterations += 1
            if step.band_end:
                prev, error = await self._run_band(step, prev, value, store, run, latest, envelopes, decisions, durable)
                if error is not None:
                    break
                i = step.band_end
                if i >= count:
                    break
                continue

            source = step.source
            if source == PREV:
                given = prev
            elif source == START:
                given = value
            else:
                given = _from_step(step, latest, envelopes)
            if step.kind == SYNC:
                # the hot path, inlined: a plain synchronous callable. This repeats _call's SYNC branch on purpose:
                # the call into _call costs ~0.1 µs per step (~15 % of the engine's per-step cost, measured with
                # bench/plan_overhead.py); every other kind goes through _call / _invoke
                t0 = _perf()
                try:
                    out = step.fn(given)
                    if type(out) is _CoroutineType:
                        raise _returned_coroutine(step, out)
                    validate = step.validate
                    if validate is not None and type(out) is not step.out_cls:
                        out = validate(out)
                    err = None
                except PlanRuntimeError:
                    raise
                except Exception as exc:
                    out, err = None, ErrorInfo.from_exception(exc, step.name, step.phase)
                env = Envelope(out, err, None, step.name, (_perf() - t0) * 1000.0)
            elif step.awaits_with_context:
                # the hot path of a runtime built as a plan (the routing agent's steps: async, the run's context
                # second), inlined like SYNC above: _invoke's coroutine costs ~1 µs per step (bench/core_overhead.py)
                t0 = _perf()
                try:
                    out = await step.fn(given, ctx)  # a step that asks for the context: the run has one
                    if returns_stops and isinstance(out, RunStopError):  # a runtime's step ends the run: as if raised
                        err = ErrorInfo.from_exception(out, step.name, step.phase)
                        out = None
                    else:
                        validate = step.validate
                        if validate is not None and type(out) is not step.out_cls:
                            out = validate(out)
                        err = None
                except PlanRuntimeError:
                    raise
                except Exception as exc:
                    out, err = None, ErrorInfo.from_exception(exc, step.name, step.phase)
                # Envelope(out, err, None, step.name, ms) without the call into its __init__ (~0.1 µs a step)
                env = _new(Envelope)
                env.payload = out
                env.error = err
                env._metadata = None
                env.step = step.name
                env.elapsed_ms = (_perf() - t0) * 1000.0
            else:
                env = _call(step, given, run) if step.direct else await _invoke(step, given, run, store)
                out, err = env.payload, env.error
            envelopes.append(env)
            if latest is not None:
                latest[i] = env
            if err is None:
                if step.writes is not None:
                    store.write(step.writes, out)
            elif err.stop_reason == INTERRUPTED:  # a question for a person: no route may catch it
                decisions.append((None, INTERRUPTED))
                error = err
                break

            # -- routing: routes= / routes_by=, then the rejoin of an exclusive branch, then linear --------
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
        if tracing:
            spans.finish(iterations)
        # what _ended does, inline: one call less on every run (the driver's cut-off path calls _ended)
        result: PlanResult = self._result_type(
            value,
            None if error is not None else prev,
            error,
            envelopes,
            decisions,
            store,
            (_perf() - started) * 1000.0,
            None if ctx is None else ctx.run_id,  # a run without a context gets its id when it is read
        )
        if self._logger.isEnabledFor(_INFO):
            self._log(result)
        return result

    async def _run_band(
        self,
        first: Compiled,
        prev: Any,
        value: Any,
        store: Any,
        run: _Run | None,
        latest: list[Envelope | None] | None,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        durable: DurableRun | None = None,
    ) -> tuple[Any, ErrorInfo | None]:
        """Run a parallel band: every member concurrently on the same inputs; apply writes only if all succeed.

        In a durable run each member that succeeds is checkpointed at once, and a resumed band runs only the
        members that had not succeeded."""
        members = self._compiled[first.index : first.band_end]
        inputs = [
            prev if m.source == PREV else value if m.source == START else _from_step(m, latest, envelopes)
            for m in members
        ]
        if durable is not None:
            results = await _durable_band(members, inputs, run, store, durable, first.band_sync)
        elif first.band_sync:
            results = [await _member(m, given, run, store) for m, given in zip(members, inputs, strict=True)]
        else:
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(_member(m, given, run, store))
                        for m, given in zip(members, inputs, strict=True)
                    ]
            except BaseExceptionGroup as failed:  # only PlanRuntimeError (and BaseExceptions) escape _member
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


class _Run:
    """One run beyond the lean branch — the one run-state object: its context, deadline, listener, spans and
    checkpoint, the path the interpreter appends to (a pathless run's: the names of the steps run), and where it is
    (what a deadline stop is built from).

    :meth:`drive` owns the run from its first step to its final event; the interpreter (:meth:`Plan._steps`) only
    runs steps and reads from here what it must watch between them.
    """

    __slots__ = (
        "at",
        "ctx",
        "deadline",
        "decisions",
        "durable",
        "emit",
        "envelopes",
        "events",
        "input",
        "max_seconds",
        "plan",
        "sent",
        "spans",
        "store",
        "walked",
        "watched",
    )

    def __init__(
        self,
        plan: Plan,
        value: Any,
        store: Any,
        ctx: RunContext[Any] | None,
        deadline: float | None,
        max_seconds: float | None,
        emit: Callable[[PlanEvent], None] | None,
        spans: RunSpans,
    ) -> None:
        self.plan = plan
        self.input = value
        self.store = store
        self.ctx = ctx
        self.deadline = deadline  # on time.monotonic(); None: no deadline
        self.max_seconds = max_seconds
        self.emit = emit  # the listener: the final event (and a runtime's own events, through the context)
        self.events = emit if plan._step_events else None  # where the StepEvents go
        self.spans = spans
        self.durable: DurableRun | None = None
        self.envelopes: list[Envelope] = []
        self.decisions: list[Decision] = []
        self.at = 0  # the step (or band) running now
        self.sent = 0  # step events emitted so far
        # the interpreter looks at the run between steps (one test per step when it need not)
        self.watched = deadline is not None or emit is not None or spans.watching
        # a pathless run's path: the names of the steps run; None: the run keeps its path (envelopes, decisions)
        self.walked: list[str] | None = [] if plan._pathless and not spans.watching else None

    def shares(self) -> bool:
        """Does a plan nested in this run share its context, deadline and spans (else it runs lean)?"""
        return self.ctx is not None or self.deadline is not None or self.spans.watching

    async def drive(
        self,
        started: float,
        timed: bool = False,
        key: str | None = None,
        answer: Any = NO_ANSWER,
        given: Any = None,
    ) -> PlanResult:
        """Run from the first step to the end, inside the run's spans, then the final event.

        ``timed``: under the budget's timer — a step still running when the deadline passes is cancelled and
        the run ends with ``max_seconds`` (:meth:`out_of_time`). ``key``: a durable run — take the key's lease,
        resume from its checkpoint (or answer from a finished one), checkpoint before every step, record how
        the run ended; ``given`` is the store the caller passed (where the checkpoints are). One frame for all of
        it: every coroutine between a door and the interpreter costs each run about 0.2 µs."""
        spans = self.spans
        tracing = spans.watching
        if tracing:
            spans.begin(self.plan.name, self.envelopes, self.decisions, self.ctx)
        try:
            result: PlanResult | None = None
            durable: DurableRun | None = None
            if key is not None:
                opened = self._open(key, answer, given)
                if isinstance(opened, PlanResult):  # it finished before: nothing runs
                    result = opened
                else:
                    durable = opened
            elif answer is not NO_ANSWER:
                raise ConfigurationError("answer= resumes a durable run: give the plan (or this run) a checkpoint_key")
            if result is None:
                try:
                    if not timed:  # no budget, or a plan of synchronous steps: it never yields to a timer
                        result = await self.plan._steps(self.input, self.store, self, started)
                    else:
                        # the timer is armed when the run first waits on something: a run that never does (its
                        # steps finish without suspending) ends before any timer could fire, and its deadline is
                        # checked between steps; arming one costs ~5 µs a run (bench/core_overhead.py)
                        steps = self.plan._steps(self.input, self.store, self, started)
                        try:
                            waiting = steps.send(None)
                        except StopIteration as finished:
                            result = finished.value
                        else:
                            assert self.deadline is not None  # a timed run has a budget
                            timer = Deadline.until(self.deadline)  # ``async with``, without its coroutines
                            try:
                                result = await _resumed(steps, waiting)
                            except BaseException as exc:
                                cut = timer.disarm(type(exc) is asyncio.CancelledError)
                                if not (cut or (timer.expired and isinstance(exc, TimeoutError))):
                                    raise
                                stop = self.out_of_time(self.at, started)
                                spans.close_step()  # the cut-off step's span, with its envelope
                                run_id = None if self.ctx is None else self.ctx.run_id
                                result = self.plan._ended(
                                    self.input, None, stop, self.envelopes, self.decisions, self.store, started, run_id
                                )
                            else:
                                timer.disarm(False)
                    if self.events is not None:
                        self.flush()
                except BaseException as exc:
                    if durable is not None:
                        durable.abort(exc)
                    raise
                finally:
                    if durable is not None:
                        durable.close()
                if durable is not None:
                    durable.finish(result)
        except BaseException as exc:  # a plan bug or a cancellation: the open spans end with it
            if tracing:
                spans.end(None, exc)
            raise
        if tracing:
            spans.end(result)
        emit = self.emit
        if emit is not None:
            emit(FinalEvent(result))
        return result

    def _open(self, key: str, answer: Any, given: Any) -> DurableRun | PlanResult:
        """Open the durable run of ``key``: the run to drive, watched from now on, or the result of the run that
        already finished under it."""
        plan = self.plan
        backend, secret = plan._backend(given)
        opened = open_run(plan._shape(), backend, key, plan.resume, plan.on_concurrent, answer, self.store, secret)
        self.spans.resumed(isinstance(opened, PlanResult) or opened.state is not None)
        if not isinstance(opened, PlanResult):
            self.durable = opened
            self.watched = True
            self.walked = None  # a durable run checkpoints its path
        return opened

    def out_of_time(self, at: int, started: float | None = None) -> ErrorInfo:
        """The one deadline handler: the run's ``max_seconds`` passed before step ``at`` ran, or while it ran —
        the timer cancelled it: then ``started`` is when the run started, and the step (every member of its
        band) gets an envelope with the stop. The stop's phase is the step's ``phase`` (``"step"`` unless the
        plan is a routing runtime that names its steps' phases)."""
        assert self.deadline is not None and self.max_seconds is not None
        compiled = self.plan._compiled
        step = compiled[at]
        walked = self.walked
        path = _path_text(walked if walked is not None else [env.step or "" for env in self.envelopes])
        cut: tuple[Compiled, ...] = ()
        # the run's time on its own clock: from when its context started (a runtime's context may have started
        # before this plan ran, e.g. a desk turn waiting for its session), else from when the run started
        elapsed = self.max_seconds + (_monotonic() - self.deadline)
        if started is None:
            message = (
                f"max_seconds={self.max_seconds} reached after {elapsed:.3f}s, before step {step.name!r} ran "
                f"(path so far: {path})"
            )
        else:
            cut = compiled[step.index : step.band_end] if step.band_end else (step,)
            names = ", ".join(repr(m.name) for m in cut)
            message = (
                f"max_seconds={self.max_seconds} reached after {elapsed:.3f}s; step {names} was cut off "
                f"(path so far: {path})"
            )
        phase = step.phase
        info = ErrorInfo("RunStopError", message, MAX_SECONDS, RunStopError(MAX_SECONDS, message, phase=phase), phase)
        if cut:
            assert started is not None
            step_ms = max((_perf() - started) * 1000.0 - sum(env.elapsed_ms for env in self.envelopes), 0.0)
            for member in cut:
                self.envelopes.append(Envelope(None, info, None, member.name, step_ms))
                self.decisions.append((None, MAX_SECONDS))
        return info

    def flush(self) -> None:
        """Emit a StepEvent for every step whose routing was decided since the last flush."""
        emit, decisions, envelopes = self.events, self.decisions, self.envelopes
        assert emit is not None
        while self.sent < len(decisions):
            index = self.sent
            self.sent = index + 1
            emit(StepEvent.of(index + 1, envelopes[index], decisions[index]))


@types.coroutine
def _resumed(steps: Coroutine[Any, Any, PlanResult], waiting: Any) -> Generator[Any, Any, PlanResult]:
    """The rest of the run ``steps``, which suspended on ``waiting`` when its driver first sent into it: what the
    event loop sends or throws in goes on to ``steps`` (the timer's cancellation included).

    Once the loop wakes the run as asyncio does (sending ``None``), ``yield from`` hands the rest of it to
    ``steps`` itself: resumed and ended in C, with no frame of this generator per resume and no ``StopIteration``."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as exc:
            try:
                waiting = steps.throw(exc)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]  # the coroutine's return value
        else:
            if sent is None:
                return (yield from steps)  # type: ignore[no-any-return]  # a coroutine in a types.coroutine generator
            try:
                waiting = steps.send(sent)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]  # the coroutine's return value


def _rejoin(pending: Compiled | None) -> int:
    return -1 if pending is None else pending.index


def _is_final(event: PlanEvent) -> bool:
    return isinstance(event, FinalEvent)


def _iterations_stop(limit: int, path: list[str], next_step: str) -> ErrorInfo:
    exc = MaxIterationsExceeded(limit, path, next_step)
    return ErrorInfo(type(exc).__name__, str(exc), MAX_ITERATIONS, exc, "step")


def _path_text(path: list[str], shown: int = 24) -> str:
    """The executed steps (their names, in order) for a message: the last ``shown`` of them, with a count of the
    ones left out."""
    names = path[-shown:]
    elided = len(path) - len(names)
    text = " → ".join(names) or "(none)"
    return f"… ({elided} earlier) → {text}" if elided else text


def _routed(step: Compiled, env: Envelope, err: ErrorInfo | None) -> int:
    """The step that ``step``'s ``routes=`` send ``env`` to (``-1``: none matched) — a pathless run's routing."""
    for target_index, predicate, _, target_name in step.routes or ():
        try:
            if predicate(env):
                return target_index
        except Exception as exc:
            raise _predicate_error(step, target_name, exc, err) from exc
    return -1


def _call(step: Compiled, given: Any, run: _Run | None) -> Envelope:
    """Run a direct (synchronous) target and wrap the outcome."""
    t0 = _perf()
    try:
        kind = step.kind
        if kind == SYNC:
            out = step.fn(given)
        elif kind == CTX_SYNC:
            out = _with_context(step, given, run)
        else:  # PROTO_SYNC
            out = _run_step(step, given, run)
        if type(out) is _CoroutineType:
            raise _returned_coroutine(step, out)
        validate = step.validate
        if validate is not None and type(out) is not step.out_cls:
            out = validate(out)
        err = None
    except PlanRuntimeError:
        raise
    except Exception as exc:
        out, err = None, ErrorInfo.from_exception(exc, step.name, step.phase)
    return Envelope(out, err, None, step.name, (_perf() - t0) * 1000.0)


async def _durable_band(
    members: tuple[Compiled, ...] | list[Compiled],
    inputs: list[Any],
    run: _Run | None,
    store: Any,
    durable: DurableRun,
    band_sync: bool,
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
    if band_sync:
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


async def _member(step: Compiled, given: Any, run: _Run | None, store: Any) -> Envelope:
    """Run a parallel band member, whatever its kind (under its own step span when the run is traced)."""
    if run is None:
        return _call(step, given, run) if step.direct else await _invoke(step, given, run, store)
    with run.spans.member(step.name) as member:
        env = _call(step, given, run) if step.direct else await _invoke(step, given, run, store)
        if env.error is not None and member.is_recording():
            record_stop(member, env.error.stop_reason)
        return env


async def _invoke(step: Compiled, given: Any, run: _Run | None, store: Any) -> Envelope:
    """Run a step whose target must be awaited (an async callable or step target, a nested plan); wrap the
    outcome. Direct targets go through :func:`_call`."""
    meta: dict[str, Any] | None = None
    kind = step.kind
    t0 = _perf()
    try:
        if kind == ASYNC:
            out = await step.fn(given)
        elif kind == PROTO_ASYNC:
            out = await _run_step(step, given, run)
        elif kind == CTX_ASYNC:
            out = await _with_context(step, given, run)
        else:  # PLAN
            target: Plan = step.target
            nested = await target._drive(given, store if target.store is None else target.store, nested=True, outer=run)
            meta = {"plan": nested}
            if nested.error is not None:  # the nested run stopped: so does this step, with its stop
                return Envelope(None, nested.error, meta, step.name, (_perf() - t0) * 1000.0)
            out = nested.output
        if step.validate is not None and type(out) is not step.out_cls:
            out = step.validate(out)
        err = None
    except PlanRuntimeError:
        raise
    except StepFailedError as failed:  # a routing agent's stop (its result in the metadata), or a misused target
        out, err, meta = None, failed.info, failed.metadata
    except Exception as exc:
        out, err = None, ErrorInfo.from_exception(exc, step.name, step.phase)
    return Envelope(out, err, meta, step.name, (_perf() - t0) * 1000.0)


def _with_context(step: Compiled, given: Any, run: _Run | None) -> Any:
    """Call a plain target that declares a RunContext parameter (the run has a context: the plan wants one)."""
    assert run is not None
    if step.ctx_positional:
        return step.fn(given, run.ctx)
    return step.fn(given, **{step.ctx_param or "": run.ctx})


def _run_step(step: Compiled, given: Any, run: _Run | None) -> Any:
    """Call a step target's ``run_step`` with its StepContext (and the RunContext, if it declares one)."""
    assert run is not None  # a plan with a step target always has a context
    scope = _SCOPE.get()
    key = None if scope is None else scope.key
    ctx = StepContext(step.name, step.task, run.input, run.store, step.sources, run.ctx, key)
    param = step.ctx_param
    if param is None:
        return step.fn(given, ctx)
    if step.ctx_positional:
        return step.fn(given, run.ctx)
    return step.fn(given, ctx, **{param: run.ctx})


def _returned_coroutine(step: Compiled, coro: types.CoroutineType[Any, Any, Any]) -> StepFailedError:
    """A synchronous target returned a coroutine: ``step_error:TypeError``, with the engine's own message."""
    coro.close()
    message = f"the target of step {step.name!r} returned a coroutine: declare it 'async def' so the plan awaits it"
    return StepFailedError(ErrorInfo("TypeError", message, "step_error:TypeError", TypeError(message)))


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _from_step(step: Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> Any:
    if step.source == BAND:
        return _from_band(step, latest, envelopes)
    env = latest[step.source_index] if latest is not None else None
    if env is None:
        source = step.step.context
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={source!r} but that step has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — reorder the plan or read "
            "from a step that runs on every path"
        )
    return env.payload if env.error is None else env.error


def _from_band(step: Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> dict[str, Any]:
    """``from_parallel_all``: the payload of every member of the band, by name (all ran, or the band did not)."""
    assert latest is not None
    first = latest[step.source_index]
    if first is None:
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={step.step.context!r} but that band has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — read from a band on every path"
        )
    joined: dict[str, Any] = {}
    for env in latest[step.source_index : step.source_end]:
        if env is not None:
            joined[env.step or ""] = env.payload if env.error is None else env.error
    return joined


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
