"""``Plan``: a declared list of steps with explicit, validated routing between them.

Everything is worked out when the plan is built (step index, route tables, predicate lists, target kinds,
validators, which steps ask for the run's :class:`~routegate.core.RunContext`), so a run is a tight loop: resolve
the step's input, call its target, wrap the output in an :class:`Envelope`, pick the next step.

There is one interpreter, :meth:`Plan._steps`. ``arun`` and ``run`` call it with no listener; ``iter`` (and its
deprecated alias ``astream``) streams its events through :func:`routegate.core._stream.stream_events`. ``run`` of a plan
whose targets are all synchronous drives the same coroutine without an event loop (it never suspends).

With a tracer provider installed, a run is a ``routegate.plan`` span with a ``routegate.step`` span per step
(:mod:`routegate.plan._spans`); the entry points look for a tracer once per run and, without one, run exactly as
before: a traced run is never lean, and the interpreter opens step spans only where it already watches a run.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Generic

from opentelemetry.trace import Span, Tracer

from routegate._lazy import warn_old_method
from routegate.core._deadline import Deadline
from routegate.core._stream import stream_events
from routegate.core._sync import run_sync
from routegate.core.context import RunContext, RunDepsT
from routegate.core.contracts import Budget
from routegate.core.result import OutputT
from routegate.core.stop_reasons import MAX_ITERATIONS, MAX_SECONDS
from routegate.core.telemetry import Attr, CurrentSpan, record_stop, span, tracer
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
    fingerprint,
    is_sync,
    wants_context,
)
from routegate.plan._position import Position
from routegate.plan._spans import PLAN_SPAN, STEP_SPAN, begin_step, end_plan, end_step, plan_attributes
from routegate.plan.durable import _SCOPE, NO_ANSWER, DurableRun, open_run
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import INTERRUPTED, MaxIterationsExceeded, PlanCompileError, PlanRuntimeError
from routegate.plan.events import PlanEvent, PlanFinalEvent, StepEvent
from routegate.plan.result import PlanResult
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import StepContext
from routegate.plan.when import _MISSING, read_field

_logger = logging.getLogger(__name__)
_perf = time.perf_counter
_monotonic = time.monotonic
_get_running_loop = asyncio._get_running_loop
_CoroutineType = types.CoroutineType
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
        self._fingerprint: str | None = None  # of the steps, for checkpoints; computed on the first durable run
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
        # no budget and no step that asks for the context: arun/run go straight to the interpreter
        self._lean = budget is None and not self._wants_ctx and checkpoint_key is None

    @property
    def step_names(self) -> tuple[str, ...]:
        return self._names

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Plan({label}steps={list(self._names)}, max_iterations={self.max_iterations})"

    # -- public API ------------------------------------------------------------------------------------------
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
        tr = tracer()
        if tr is not None:
            return await self._traced(tr, payload, store, deps, None, not self._all_sync, checkpoint_key, answer)
        if self._lean and checkpoint_key is None and answer is NO_ANSWER:
            return await self._steps(payload, store, None, _perf())
        return await self._start(payload, store, deps, None, not self._all_sync, checkpoint_key, answer)

    def run(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> PlanResult[OutputT]:
        """Synchronous :meth:`arun` (not from inside a running event loop).

        A plan whose targets are all synchronous never suspends, so it runs right here with no event loop; the
        deadline of its budget is then checked between steps (a running synchronous step cannot be cut off).
        Any other plan runs on the per-thread loop of :func:`routegate.core._sync.run_sync`.
        """
        if not self._all_sync:
            return run_sync(
                self.arun(payload, store=store, deps=deps, checkpoint_key=checkpoint_key, answer=answer), what="run"
            )
        if _get_running_loop() is not None:
            raise ConfigurationError(
                "run() was called from inside a running event loop; use 'await ...arun(...)' there instead"
            )
        tr = tracer()
        if tr is not None:
            coro = self._traced(tr, payload, store, deps, None, False, checkpoint_key, answer)
        elif self._lean and checkpoint_key is None and answer is NO_ANSWER:
            coro = self._steps(payload, store, None, _perf())
        else:
            coro = self._start(payload, store, deps, None, False, checkpoint_key, answer)
        try:
            coro.send(None)
        except StopIteration as done:
            result: PlanResult = done.value
            return result
        coro.close()  # pragma: no cover - a synchronous plan cannot suspend
        raise PlanRuntimeError("internal error: a synchronous plan suspended")  # pragma: no cover

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
        timed = not self._all_sync

        def start(emit: Callable[[PlanEvent], None]) -> Coroutine[Any, Any, PlanResult]:
            tr = tracer()
            if tr is not None:
                return self._traced(tr, payload, store, deps, emit, timed, checkpoint_key, answer)
            return self._start(payload, store, deps, emit, timed, checkpoint_key, answer)

        return stream_events(start, _is_final)

    def astream(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> AsyncIterator[PlanEvent]:
        """Deprecated: :meth:`iter` under its old name (warns)."""
        warn_old_method("Plan", "astream", "iter")
        return self.iter(payload, store=store, deps=deps, checkpoint_key=checkpoint_key, answer=answer)

    # -- one run -----------------------------------------------------------------------------------------------
    async def _traced(
        self,
        tr: Tracer,
        value: Any,
        store: Any,
        deps: Any,
        emit: Callable[[PlanEvent], None] | None,
        timed: bool,
        key: str | None,
        answer: Any,
    ) -> PlanResult:
        """A run under its ``routegate.plan`` span (a tracer provider is installed)."""
        with span(tr, PLAN_SPAN, plan_attributes(self.name)) as root:
            result = await self._start(value, store, deps, emit, timed, key, answer, tr, root)
            end_plan(root, result)
        return result

    async def _start(
        self,
        value: Any,
        store: Any,
        deps: Any,
        emit: Callable[[PlanEvent], None] | None,
        timed: bool,
        key: str | None = None,
        answer: Any = NO_ANSWER,
        tr: Tracer | None = None,
        root: Span | None = None,
    ) -> PlanResult:
        """A run on its own: its context and deadline, the interpreter, the final event.

        The deadline is checked between steps; ``timed=True`` adds a timer that cancels a step still running
        when it passes. A plan whose steps are all synchronous runs with ``timed=False``: it never yields to the
        event loop, so a timer could not fire before the run ended anyway (and ``run()`` drives it without a loop
        at all). A plan with no budget, no listener and no step that asks for the context runs lean: no
        :class:`_Run`, no context, no timer.
        """
        started = _perf()
        given_store = store
        if store is None:
            store = self.store
            if store is None and self._has_writes:
                store = Store()
        key = key if key is not None else self.checkpoint_key
        if key is None and answer is not NO_ANSWER:
            raise ConfigurationError("answer= resumes a durable run: give the plan (or this run) a checkpoint_key")
        if key is not None:
            backend, secret = self._backend(given_store)
            fp = self._fingerprint
            if fp is None:
                fp = self._fingerprint = fingerprint(self._compiled)
            opened = open_run(self._compiled, fp, backend, key, self.resume, self.on_concurrent, answer, store, secret)
            if root is not None:  # a finished run answered from its checkpoint, or one that continues
                root.set_attribute(Attr.RESUMED, isinstance(opened, PlanResult) or opened.state is not None)
            if isinstance(opened, PlanResult):
                if emit is not None:
                    emit(PlanFinalEvent(opened))
                return opened
            try:
                result = await self._timed(value, store, deps, emit, timed, started, opened, tr, root)
            except BaseException as exc:
                opened.abort(exc)
                raise
            finally:
                opened.close()
            opened.finish(result)
            if emit is not None:
                emit(PlanFinalEvent(result))
            return result
        if self._lean and emit is None and tr is None:
            return await self._steps(value, store, None, started)
        result = await self._timed(value, store, deps, emit, timed, started, None, tr, root)
        if emit is not None:
            emit(PlanFinalEvent(result))
        return result

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

    async def _timed(
        self,
        value: Any,
        store: Any,
        deps: Any,
        emit: Callable[[PlanEvent], None] | None,
        timed: bool,
        started: float,
        durable: DurableRun | None,
        tr: Tracer | None = None,
        root: Span | None = None,
    ) -> PlanResult:
        """The run with its context and deadline (see :meth:`_start`); emits the step events, not the final one."""
        budget = self.budget
        ctx: RunContext[Any] | None = None
        deadline: float | None = None
        if budget is not None:
            if self._wants_ctx:
                ctx = RunContext.start(deps, budget, emit=emit)
                deadline = ctx.deadline
            else:
                deadline = _monotonic() + budget.max_seconds
        elif self._wants_ctx:
            ctx = RunContext(deps, emit=emit, tracer=tr)
        run = _Run(value, store, ctx, deadline, None if budget is None else budget.max_seconds, emit, tr)
        try:
            if budget is None or not timed:
                result = await self._steps(value, store, run, started, durable)
            else:
                timer = Deadline(budget.max_seconds)
                try:
                    async with timer:
                        result = await self._steps(value, store, run, started, durable)
                except TimeoutError:
                    if not timer.expired:
                        raise
                    stop = self._cut_off(run, started)
                    if tr is not None and run.step is not None:  # the cut-off step's span, with its envelope
                        _end_step(run)
                    result = self._result(run.input, store, run.envelopes, run.decisions, stop, started, ctx)
        except BaseException as exc:  # a plan bug or a cancellation: the open step span ends with it
            if tr is not None and run.step is not None:
                _end_step(run, exc)
            raise
        if emit is not None:
            _flush(run)
        if root is not None:
            root.set_attribute(Attr.ITERATIONS, run.iteration)
        return result

    async def _nested(self, value: Any, store: Any, outer: _Run | None) -> PlanResult:
        """This plan as a step of another: the outer run's context and deadline (its own budget's ``max_seconds``
        does not apply; its ``max_iterations`` does), no events of its own."""
        started = _perf()
        if store is None and self._has_writes:
            store = Store()
        if outer is not None and outer.tracer is not None:
            return await self._nested_traced(value, store, outer, outer.tracer, started)
        run = None
        if outer is not None and (outer.ctx is not None or outer.deadline is not None):
            run = _Run(value, store, outer.ctx, outer.deadline, outer.max_seconds, None)
        return await self._steps(value, store, run, started)

    async def _nested_traced(self, value: Any, store: Any, outer: _Run, tr: Tracer, started: float) -> PlanResult:
        """:meth:`_nested` under its own ``routegate.plan`` span, below the outer step's."""
        with span(tr, PLAN_SPAN, plan_attributes(self.name)) as root:
            run = _Run(value, store, outer.ctx, outer.deadline, outer.max_seconds, None, tr)
            try:
                result = await self._steps(value, store, run, started)
            except BaseException as exc:
                if run.step is not None:
                    _end_step(run, exc)
                raise
            end_plan(root, result, run.iteration)
        return result

    def _result(
        self,
        value: Any,
        store: Any,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        error: ErrorInfo | None,
        started: float,
        ctx: RunContext[Any] | None,
    ) -> PlanResult:
        """The result of a run that stopped outside the interpreter (the deadline cut it off)."""
        run_id = None if ctx is None else ctx.run_id
        result = PlanResult(value, None, error, envelopes, decisions, store, (_perf() - started) * 1000.0, run_id)
        if _logger.isEnabledFor(logging.INFO):
            self._log(result)
        return result

    def _log(self, result: PlanResult) -> None:
        _logger.info(
            "plan %s path=%s stop_reason=%s latency_ms=%.3f",
            self.name or "-",
            ">".join(result.path),
            result.stop_reason,
            result.elapsed_ms,
        )

    def _cut_off(self, run: _Run, started: float) -> ErrorInfo:
        """The deadline cancelled the step (or parallel band) at ``run.at``: it ends the run with ``max_seconds``."""
        step = self._compiled[run.at]
        members = self._compiled[step.index : step.band_end] if step.band_end else (step,)
        total_ms = (_perf() - started) * 1000.0
        step_ms = max(total_ms - sum(env.elapsed_ms for env in run.envelopes), 0.0)
        names = ", ".join(repr(m.name) for m in members)
        message = (
            f"max_seconds={run.max_seconds} reached after {total_ms / 1000:.3f}s; step {names} was cut off "
            f"(path so far: {_path_text(run.envelopes)})"
        )
        info = ErrorInfo("RunStopError", message, MAX_SECONDS, RunStopError(MAX_SECONDS, message, phase="step"), "step")
        for member in members:
            run.envelopes.append(Envelope(None, info, None, member.name, step_ms))
            run.decisions.append((None, MAX_SECONDS))
        return info

    # -- the interpreter -------------------------------------------------------------------------------------
    async def _steps(
        self, value: Any, store: Any, run: _Run | None, started: float, durable: DurableRun | None = None
    ) -> PlanResult:
        """Run steps from the first until the plan ends or stops, and return how it ended.

        ``run`` is ``None`` for a lean run (see :meth:`_start`); otherwise the interpreter appends to its lists,
        keeps ``run.at`` on the running step, emits step events and checks the deadline between steps.
        """
        if store is None:
            store = self.store
            if store is None and self._has_writes:
                store = Store()
        compiled = self._compiled
        names = self._names
        count = len(compiled)
        limit = self.max_iterations
        deadline: float | None = None
        emit: Callable[[PlanEvent], None] | None = None
        envelopes: list[Envelope]
        decisions: list[tuple[str | None, str]]
        traced: Tracer | None = None
        if run is None:  # a lean run: no deadline, listener, checkpoints or spans to watch
            envelopes, decisions = [], []
            watched = False
        else:
            envelopes, decisions, deadline, emit, traced = (
                run.envelopes,
                run.decisions,
                run.deadline,
                run.emit,
                run.tracer,
            )
            # one test per step when none is set
            watched = deadline is not None or emit is not None or durable is not None or traced is not None
        latest: list[Envelope | None] | None = [None] * count if self._uses_from_step else None
        # the rejoin point of the exclusive branch being entered: the routed-to step always runs next, so one
        # pending rejoin suffices; it is consumed when that step completes
        rejoin_next: Compiled | None = None
        error: ErrorInfo | None = None
        prev: Any = value
        iterations = 0
        i = 0
        if durable is not None:
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
            if run is not None:
                run.input = value
        while True:
            if iterations == limit:
                if durable is not None:  # the resume point of the stopped run: the step it did not run
                    durable.save(Position(i, prev, iterations, _rejoin(rejoin_next), envelopes, decisions), store)
                error = _iterations_stop(limit, envelopes, names[i])
                break
            if watched:
                assert run is not None
                if traced is not None and run.step is not None:  # the previous step's routing is decided
                    _end_step(run)
                if durable is not None:
                    durable.save(Position(i, prev, iterations, _rejoin(rejoin_next), envelopes, decisions), store)
                if emit is not None:
                    _flush(run)
                if deadline is not None and _monotonic() >= deadline:
                    error = _deadline_stop(run, names[i])
                    break
                run.at = i
                if traced is not None:
                    run.iteration = iterations + 1
                    if not compiled[i].band_end:  # a band's members each open their own span
                        run.step_at = len(envelopes)
                        run.step = begin_step(traced, names[i], iterations + 1)
            iterations += 1
            step = compiled[i]
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
                    out, err = None, ErrorInfo.from_exception(exc)
                env = Envelope(out, err, None, step.name, (_perf() - t0) * 1000.0)
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
                decisions.append((None, step.why_end if step.by_field is None else _by_miss(step, out, "end")))
                break
            decisions.append((None, step.why_linear if step.by_field is None else _by_miss(step, out, "linear")))
        if traced is not None:
            assert run is not None
            run.iteration = iterations
            if run.step is not None:
                _end_step(run)
        ctx = None if run is None else run.ctx
        result = PlanResult(
            value,
            None if error is not None else prev,
            error,
            envelopes,
            decisions,
            store,
            (_perf() - started) * 1000.0,
            None if ctx is None else ctx.run_id,  # a run without a context gets its id when it is read
        )
        if _logger.isEnabledFor(logging.INFO):
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
    """One run's state beyond the lean path: its context, deadline and listener, the lists the interpreter appends
    to, and where it is (what a deadline stop is built from)."""

    __slots__ = (
        "at",
        "ctx",
        "deadline",
        "decisions",
        "emit",
        "envelopes",
        "input",
        "iteration",
        "max_seconds",
        "sent",
        "step",
        "step_at",
        "store",
        "tracer",
    )

    def __init__(
        self,
        value: Any,
        store: Any,
        ctx: RunContext[Any] | None,
        deadline: float | None,
        max_seconds: float | None,
        emit: Callable[[PlanEvent], None] | None,
        tracer: Tracer | None = None,
    ) -> None:
        self.input = value
        self.store = store
        self.ctx = ctx
        self.deadline = deadline  # on time.monotonic(); None: no deadline
        self.max_seconds = max_seconds
        self.emit = emit
        self.envelopes: list[Envelope] = []
        self.decisions: list[tuple[str | None, str]] = []
        self.at = 0  # the step (or band) running now
        self.sent = 0  # step events emitted so far
        self.tracer = tracer  # None: no spans (no tracer provider installed)
        if tracer is not None:  # read only where the run is traced: an untraced run does not set them
            self.step: CurrentSpan | None = None  # the span of the step whose routing is being decided
            self.step_at = 0  # the index of that step's envelope
            self.iteration = 0  # the iteration running now (at the end: the iterations used)


def _flush(run: _Run) -> None:
    """Emit a StepEvent for every step whose routing was decided since the last flush."""
    emit, decisions, envelopes = run.emit, run.decisions, run.envelopes
    assert emit is not None
    while run.sent < len(decisions):
        index = run.sent
        run.sent = index + 1
        emit(StepEvent.of(index + 1, envelopes[index], decisions[index]))


def _end_step(run: _Run, exc: BaseException | None = None) -> None:
    """Close the open step span with what the step did (its envelope and routing, once they exist)."""
    opened, at = run.step, run.step_at
    assert opened is not None
    run.step = None
    envelopes, decisions = run.envelopes, run.decisions
    end_step(
        opened,
        envelopes[at] if at < len(envelopes) else None,
        decisions[at] if at < len(decisions) else None,
        exc,
    )


def _rejoin(pending: Compiled | None) -> int:
    return -1 if pending is None else pending.index


def _is_final(event: PlanEvent) -> bool:
    return isinstance(event, PlanFinalEvent)


def _iterations_stop(limit: int, envelopes: list[Envelope], next_step: str) -> ErrorInfo:
    exc = MaxIterationsExceeded(limit, [env.step or "" for env in envelopes], next_step)
    return ErrorInfo(type(exc).__name__, str(exc), MAX_ITERATIONS, exc, "step")


def _deadline_stop(run: _Run, next_step: str) -> ErrorInfo:
    assert run.deadline is not None and run.max_seconds is not None
    elapsed = run.max_seconds + (_monotonic() - run.deadline)
    message = (
        f"max_seconds={run.max_seconds} reached after {elapsed:.3f}s, before step {next_step!r} ran "
        f"(path so far: {_path_text(run.envelopes)})"
    )
    return ErrorInfo("RunStopError", message, MAX_SECONDS, RunStopError(MAX_SECONDS, message, phase="step"), "step")


def _path_text(envelopes: list[Envelope], shown: int = 24) -> str:
    """The executed steps for a message: the last ``shown`` of them, with a count of the ones left out."""
    names = [env.step or "" for env in envelopes[-shown:]]
    elided = len(envelopes) - len(names)
    text = " → ".join(names) or "(none)"
    return f"… ({elided} earlier) → {text}" if elided else text


class _StepFailed(Exception):
    """A nested plan ended on a failed step: its error becomes the outer step's error."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


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
        out, err = None, ErrorInfo.from_exception(exc)
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
    if run is not None and run.tracer is not None:
        with span(run.tracer, STEP_SPAN, {Attr.STEP: step.name, Attr.ITERATION: run.iteration}) as member:
            env = _call(step, given, run) if step.direct else await _invoke(step, given, run, store)
            if env.error is not None and member.is_recording():
                record_stop(member, env.error.stop_reason)
            return env
    return _call(step, given, run) if step.direct else await _invoke(step, given, run, store)


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
            nested = await target._nested(given, store if target.store is None else target.store, run)
            meta = {"plan": nested}
            if nested.error is not None:
                raise _StepFailed(nested.error)
            out = nested.output
        if step.validate is not None and type(out) is not step.out_cls:
            out = step.validate(out)
        err = None
    except PlanRuntimeError:
        raise
    except _StepFailed as failed:
        out, err = None, failed.info
    except Exception as exc:
        out, err = None, ErrorInfo.from_exception(exc)
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


def _returned_coroutine(step: Compiled, coro: types.CoroutineType[Any, Any, Any]) -> TypeError:
    coro.close()
    return TypeError(
        f"the target of step {step.name!r} returned a coroutine: declare it 'async def' so the plan awaits it"
    )


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
    if err is not None:
        note = (
            f" (the step itself failed with {err.type}: {err.message}; put when.errored() first in routes= "
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
