"""``Plan``: a declared list of steps with explicit, validated routing between them.

Everything is worked out when the plan is built (step index, route tables, predicate lists, target kinds,
validators), so a run is a tight loop: resolve the step's input, call its target, wrap the output in an
:class:`Envelope`, pick the next step. ``arun`` is the primary API; ``run`` is its synchronous twin.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from collections.abc import Mapping
from typing import Any

from routegate.core import run_sync
from routegate.errors import ConfigurationError
from routegate.plan._compiled import ASYNC, PLAN, PREV, PROTO_SYNC, START, STEP, SYNC, Compiled, compile_steps, is_sync
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import MaxIterationsExceeded, PlanCompileError, PlanRuntimeError
from routegate.plan.result import PlanResult
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import StepContext
from routegate.plan.when import _MISSING, read_field

_logger = logging.getLogger(__name__)
_perf = time.perf_counter
_get_running_loop = asyncio._get_running_loop
_CoroutineType = types.CoroutineType


class Plan:
    """A plan: ``Plan(Step(...), Step(...), ..., max_iterations=100)``; validated here, run with ``arun``/``run``.

    * ``max_iterations`` — the most steps one run may execute (a parallel band counts once); a run that
      needs more raises :class:`~routegate.plan.MaxIterationsExceeded` (the safety net for routing loops).
    * ``store`` — the :class:`~routegate.plan.Store` that ``writes=`` go to (a run may pass its own); without
      one, a plan whose steps write gets a fresh store per run, returned as ``result.store``.
    * ``strict`` — the detour trap (a forward route without ``after_branches=`` to a step that is not the last)
      is a :class:`PlanCompileError` instead of a :class:`DetourTrapWarning`.
    * ``targets`` — what string targets name: ``Step("search")`` runs ``targets["search"]``.
    * ``name`` — the step name this plan gets when nested in another plan.

    Construction raises :class:`PlanCompileError` for any invalid graph, before anything runs.
    """

    def __init__(
        self,
        *steps: Step,
        max_iterations: int = 100,
        store: Any = None,
        strict: bool = False,
        name: str | None = None,
        targets: Mapping[str, Any] | None = None,
    ) -> None:
        if not steps:
            raise PlanCompileError("a Plan needs at least one Step")
        for index, step in enumerate(steps):
            if not isinstance(step, Step):
                raise PlanCompileError(
                    f"Plan arguments must be Step objects; argument {index} is {step!r} (wrap it: Step(x, name=...))"
                )
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise PlanCompileError(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
        if store is not None and not callable(getattr(store, "write", None)):
            raise PlanCompileError(f"store= must have a write(key, value) method (a Store), got {store!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise PlanCompileError(f"Plan name= must be a non-empty string, got {name!r}")
        self.steps: tuple[Step, ...] = steps
        self.max_iterations = max_iterations
        self.store = store
        self.strict = strict
        self.name = name
        self._compiled = compile_steps(steps, targets, strict, Plan)
        self._names = tuple(step.name for step in steps)
        self._has_writes = any(step.writes is not None for step in steps)
        self._uses_from_step = any(c.source == STEP for c in self._compiled)
        self._all_sync = all(is_sync(c) for c in self._compiled)

    @property
    def step_names(self) -> tuple[str, ...]:
        return self._names

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Plan({label}steps={list(self._names)}, max_iterations={self.max_iterations})"

    # -- public API ------------------------------------------------------------------------------------------
    async def arun(self, payload: Any = None, *, store: Any = None) -> PlanResult:
        """Run the plan on ``payload`` (the first step's input) and return how it ended."""
        return await self._execute(payload, self.store if store is None else store)

    def run(self, payload: Any = None, *, store: Any = None) -> PlanResult:
        """Synchronous :meth:`arun` (not from inside a running event loop).

        A plan whose targets are all synchronous never suspends, so it runs right here with no event loop;
        any other plan runs on the per-thread loop of :func:`routegate.core._sync.run_sync`.
        """
        effective = self.store if store is None else store
        if not self._all_sync:
            return run_sync(self._execute(payload, effective), what="run")
        if _get_running_loop() is not None:
            raise ConfigurationError(
                "run() was called from inside a running event loop; use 'await ...arun(...)' there instead"
            )
        coro = self._execute(payload, effective)
        try:
            coro.send(None)
        except StopIteration as done:
            result: PlanResult = done.value
            return result
        coro.close()  # pragma: no cover - a synchronous plan cannot suspend
        raise PlanRuntimeError("internal error: a synchronous plan suspended")  # pragma: no cover

    # -- the run loop ----------------------------------------------------------------------------------------
    async def _execute(self, value: Any, store: Any) -> PlanResult:
        started = _perf()
        compiled = self._compiled
        names = self._names
        count = len(compiled)
        limit = self.max_iterations
        if store is None and self._has_writes:
            store = Store()
        envelopes: list[Envelope] = []
        decisions: list[tuple[str | None, str]] = []
        latest: list[Envelope | None] | None = [None] * count if self._uses_from_step else None
        # the rejoin point of the exclusive branch being entered: the routed-to step always runs next, so one
        # pending rejoin suffices; it is consumed when that step completes
        rejoin_next: Compiled | None = None
        error: ErrorInfo | None = None
        prev: Any = value
        iterations = 0
        i = 0
        while True:
            if iterations == limit:
                raise MaxIterationsExceeded(limit, [env.step or "" for env in envelopes], names[i])
            iterations += 1
            step = compiled[i]
            if step.band_end:
                prev, error = await self._run_band(step, prev, value, store, envelopes, decisions, latest)
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
            if step.kind == SYNC:  # the hot path, inlined; every other kind goes through _invoke
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
                env = await _invoke(step, given, value, store)
                out, err = env.payload, env.error
            envelopes.append(env)
            if latest is not None:
                latest[i] = env
            if err is None and step.writes is not None:
                store.write(step.writes, out)

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
        result = PlanResult(
            value,
            None if error is not None else prev,
            error,
            envelopes,
            decisions,
            store,
            (_perf() - started) * 1000.0,
        )
        if _logger.isEnabledFor(logging.INFO):
            _logger.info(
                "plan %s path=%s stop_reason=%s latency_ms=%.3f",
                self.name or "-",
                ">".join(env.step or "" for env in envelopes),
                result.stop_reason,
                result.elapsed_ms,
            )
        return result

    async def _run_band(
        self,
        first: Compiled,
        prev: Any,
        value: Any,
        store: Any,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        latest: list[Envelope | None] | None,
    ) -> tuple[Any, ErrorInfo | None]:
        """Run a parallel band: every member concurrently on the same inputs; apply writes only if all succeed."""
        members = self._compiled[first.index : first.band_end]
        inputs = [
            prev if m.source == PREV else value if m.source == START else _from_step(m, latest, envelopes)
            for m in members
        ]
        if first.band_sync:
            results = [await _invoke(m, given, value, store) for m, given in zip(members, inputs, strict=True)]
        else:
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [
                        group.create_task(_invoke(m, given, value, store))
                        for m, given in zip(members, inputs, strict=True)
                    ]
            except BaseExceptionGroup as failed:  # only PlanRuntimeError (and BaseExceptions) escape _invoke
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


class _StepFailed(Exception):
    """A nested plan ended on a failed step: its error becomes the outer step's error."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


async def _invoke(step: Compiled, given: Any, value: Any, store: Any) -> Envelope:
    """Run one step's target and wrap the outcome (the main loop inlines the sync-callable case)."""
    meta: dict[str, Any] | None = None
    kind = step.kind
    t0 = _perf()
    try:
        if kind == SYNC:
            out = step.fn(given)
            if type(out) is _CoroutineType:
                raise _returned_coroutine(step, out)
        elif kind == ASYNC:
            out = await step.fn(given)
        elif kind == PLAN:
            nested: PlanResult = await step.target._execute(
                given, store if step.target.store is None else step.target.store
            )
            meta = {"plan": nested}
            if nested.error is not None:
                raise _StepFailed(nested.error)
            out = nested.payload
        else:
            ctx = StepContext(step.name, step.task, value, store, step.sources)
            out = step.fn(given, ctx) if kind == PROTO_SYNC else await step.fn(given, ctx)
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


def _returned_coroutine(step: Compiled, coro: types.CoroutineType[Any, Any, Any]) -> TypeError:
    coro.close()
    return TypeError(
        f"the target of step {step.name!r} returned a coroutine: declare it 'async def' so the plan awaits it"
    )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _from_step(step: Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> Any:
    env = latest[step.source_index] if latest is not None else None
    if env is None:
        source = step.step.context
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={source!r} but that step has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — reorder the plan or read "
            "from a step that runs on every path"
        )
    return env.payload if env.error is None else env.error


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
