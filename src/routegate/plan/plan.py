"""``Plan``: a declared list of steps with explicit, validated routing between them.

Everything is worked out when the plan is built (step index, route tables, predicate lists, target kinds,
validators), so a run is a tight loop: resolve the step's input, call its target, wrap the output in an
:class:`Envelope`, pick the next step. ``arun`` is the primary API; ``run`` is its synchronous twin.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import types
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from difflib import get_close_matches
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from routegate.core import RoutingAgent
from routegate.core._sync import run_sync
from routegate.core.contracts import TraceEntry, jsonable
from routegate.errors import ConfigurationError
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import DetourTrapWarning, MaxIterationsExceeded, PlanCompileError, PlanRuntimeError
from routegate.plan.sentinels import FromPrev, FromStart
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import (
    AgentTarget,
    ChatCompleterTarget,
    ChatModelTarget,
    StepContext,
    is_awaitable_function,
)
from routegate.plan.when import _MISSING, Predicate, callable_name, read_field

_logger = logging.getLogger(__name__)
_perf = time.perf_counter
_get_running_loop = asyncio._get_running_loop
_CoroutineType = types.CoroutineType

# target kinds
_SYNC, _ASYNC, _PROTO_SYNC, _PROTO_ASYNC, _PLAN = range(5)
# input sources
_PREV, _START, _STEP = range(3)

SUCCESS = "success"


class _Compiled:
    """One step as the run loop sees it: everything precomputed."""

    __slots__ = (
        "band_end",
        "band_sync",
        "by_field",
        "by_map",
        "by_why",
        "fn",
        "index",
        "kind",
        "name",
        "out_cls",
        "rejoin",
        "rejoin_why",
        "routes",
        "source",
        "source_index",
        "sources",
        "step",
        "target",
        "task",
        "validate",
        "why_end",
        "why_linear",
        "writes",
    )

    def __init__(self, step: Step, index: int) -> None:
        self.step = step
        self.index = index
        self.name = step.name
        self.task = step.task
        self.sources = step.sources
        self.writes = step.writes
        self.kind = _SYNC
        self.fn: Callable[..., Any] = _identity
        self.target: Any = step.target
        self.source = _PREV
        self.source_index = -1
        self.validate: Callable[[Any], Any] | None = None
        self.out_cls: type | None = None
        self.routes: tuple[tuple[int, Callable[[Envelope], Any], str, str], ...] | None = None
        self.by_field: str | None = None
        self.by_map: dict[str, int] = {}
        self.by_why: dict[str, str] = {}
        self.rejoin = -1
        self.rejoin_why = ""
        self.band_end = 0  # > 0 only on the first step of a parallel band: index after the band
        self.band_sync = False
        self.why_linear = "linear"
        self.why_end = "end"


def _identity(value: Any) -> Any:
    return value


class PlanResult:
    """How a plan run ended.

    * ``payload`` — the last step's payload (``None`` when the run ended on a failed step);
    * ``ok`` / ``error`` / ``stop_reason`` — ``"success"``, or the failed step's ``step_error:<Exception>``;
    * ``path`` — the executed step names, in order; ``envelopes`` — one :class:`Envelope` per executed step
      (payload, error, ``elapsed_ms``); ``envelope(name)`` — the latest one of a step;
    * ``trace`` — the core trace format: one :class:`~routegate.core.TraceEntry` per executed step
      (``phase="step"``, ``next`` = the step routed to, ``why`` = what decided);
    * ``store`` — the store the run wrote to (``None`` when no store was given and no step writes).
    """

    __slots__ = ("_decisions", "_trace", "elapsed_ms", "envelopes", "error", "input", "payload", "store")

    def __init__(
        self,
        input: Any,
        payload: Any,
        error: ErrorInfo | None,
        envelopes: list[Envelope],
        decisions: list[tuple[str | None, str]],
        store: Any,
        elapsed_ms: float,
    ) -> None:
        self.input = input
        self.payload = payload
        self.error = error
        self.envelopes = envelopes
        self._decisions = decisions
        self.store = store
        self.elapsed_ms = elapsed_ms
        self._trace: tuple[TraceEntry, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def stop_reason(self) -> str:
        return SUCCESS if self.error is None else self.error.stop_reason

    @property
    def path(self) -> tuple[str, ...]:
        return tuple([env.step or "" for env in self.envelopes])

    def envelope(self, name: str) -> Envelope:
        """The latest envelope of the step ``name`` in this run; ``KeyError`` if it did not run."""
        for env in reversed(self.envelopes):
            if env.step == name:
                return env
        raise KeyError(f"step {name!r} did not run; path: {list(self.path)}")

    @property
    def trace(self) -> tuple[TraceEntry, ...]:
        if self._trace is None:
            entries = []
            for attempt, (env, (nxt, why)) in enumerate(zip(self.envelopes, self._decisions, strict=True), 1):
                error = env.error
                entries.append(
                    TraceEntry(
                        attempt=attempt,
                        target=env.step,
                        ok=error is None,
                        phase="step",
                        elapsed_ms=round(env.elapsed_ms, 3),
                        stop_reason=None if error is None else error.stop_reason,
                        why=why,
                        next=nxt,
                    )
                )
            self._trace = tuple(entries)
        return self._trace

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "ok" if self.error is None else "stopped",
            "stop_reason": self.stop_reason,
            "payload": jsonable(self.payload),
            "path": list(self.path),
        }
        if self.error is not None:
            out["error"] = self.error.to_dict()
        out["trace"] = [entry.to_dict() for entry in self.trace]
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def __repr__(self) -> str:
        return f"PlanResult(stop_reason={self.stop_reason!r}, path={list(self.path)})"


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
        self._compiled = _compile(self, steps, targets, strict)
        self._names = tuple(step.name for step in steps)
        self._has_writes = any(step.writes is not None for step in steps)
        self._uses_from_step = any(c.source == _STEP for c in self._compiled)
        self._all_sync = all(_is_sync(c) for c in self._compiled)

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
        rejoin_next: _Compiled | None = None
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
            if source == _PREV:
                given = prev
            elif source == _START:
                given = value
            else:
                given = _from_step(step, latest, envelopes)
            if step.kind == _SYNC:  # the hot path, inlined; every other kind goes through _invoke
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
        first: _Compiled,
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
            prev if m.source == _PREV else value if m.source == _START else _from_step(m, latest, envelopes)
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


async def _invoke(step: _Compiled, given: Any, value: Any, store: Any) -> Envelope:
    """Run one step's target and wrap the outcome (the main loop inlines the sync-callable case)."""
    meta: dict[str, Any] | None = None
    kind = step.kind
    t0 = _perf()
    try:
        if kind == _SYNC:
            out = step.fn(given)
            if type(out) is _CoroutineType:
                raise _returned_coroutine(step, out)
        elif kind == _ASYNC:
            out = await step.fn(given)
        elif kind == _PLAN:
            nested: PlanResult = await step.target._execute(
                given, store if step.target.store is None else step.target.store
            )
            meta = {"plan": nested}
            if nested.error is not None:
                raise _StepFailed(nested.error)
            out = nested.payload
        else:
            ctx = StepContext(step.name, step.task, value, store, step.sources)
            out = step.fn(given, ctx) if kind == _PROTO_SYNC else await step.fn(given, ctx)
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


def _returned_coroutine(step: _Compiled, coro: types.CoroutineType[Any, Any, Any]) -> TypeError:
    coro.close()
    return TypeError(
        f"the target of step {step.name!r} returned a coroutine: declare it 'async def' so the plan awaits it"
    )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _from_step(step: _Compiled, latest: list[Envelope | None] | None, envelopes: list[Envelope]) -> Any:
    env = latest[step.source_index] if latest is not None else None
    if env is None:
        source = step.step.context
        raise PlanRuntimeError(
            f"Step {step.name!r}: context={source!r} but that step has not run in this run "
            f"(path so far: {[e.step for e in envelopes]}); routing skipped it — reorder the plan or read "
            "from a step that runs on every path"
        )
    return env.payload if env.error is None else env.error


def _predicate_error(step: _Compiled, target: str, exc: Exception, err: ErrorInfo | None) -> PlanRuntimeError:
    note = ""
    if err is not None:
        note = (
            f" (the step itself failed with {err.type}: {err.message}; put when.errored() first in routes= "
            "to route failures)"
        )
    return PlanRuntimeError(
        f"Step {step.name!r}: routes predicate for target {target!r} raised {type(exc).__name__}: {exc}{note}"
    )


def _by_miss(step: _Compiled, out: Any, then: str) -> str:
    chosen = read_field(out, step.by_field or "")
    if chosen is _MISSING or chosen is None:
        return f"routes_by {step.by_field}=None; {then}"
    return f"routes_by {step.by_field}={chosen!r} is not a step; {then}"


def _is_sync(step: _Compiled) -> bool:
    if step.kind == _PLAN:
        return bool(step.target._all_sync)
    return step.kind in (_SYNC, _PROTO_SYNC)


# -- compilation ---------------------------------------------------------------------------------------------------
def _hint(name: str, known: list[str]) -> str:
    close = get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; known steps: {known}"


def _compile(
    plan: Plan, steps: tuple[Step, ...], targets: Mapping[str, Any] | None, strict: bool
) -> tuple[_Compiled, ...]:
    names = [step.name for step in steps]
    duplicates = sorted(name for name, times in Counter(names).items() if times > 1)
    if duplicates:
        raise PlanCompileError(f"duplicate step names: {duplicates}; every step needs a unique name=")
    pos = {name: index for index, name in enumerate(names)}
    count = len(steps)

    # parallel bands: band[i] = index of the band's first step, or -1
    band = [-1] * count
    for index, step in enumerate(steps):
        if step.parallel:
            band[index] = band[index - 1] if index > 0 and steps[index - 1].parallel else index

    compiled = [_Compiled(step, index) for index, step in enumerate(steps)]
    for index, (step, c) in enumerate(zip(steps, compiled, strict=True)):
        where = f"Step {step.name!r}"
        _bind_target(step, c, targets)

        # input sentinel
        context = step.context
        if isinstance(context, FromPrev):
            c.source = _PREV
        elif isinstance(context, FromStart):
            c.source = _START
        else:
            source = context.name
            if source not in pos:
                raise PlanCompileError(
                    f"{where}: context=from_step({source!r}) names an unknown step{_hint(source, names)}"
                )
            if pos[source] >= index:
                raise PlanCompileError(
                    f"{where}: context=from_step({source!r}) must name a step declared earlier "
                    f"({source!r} is at position {pos[source]}, {step.name!r} at {index})"
                )
            if band[index] >= 0 and band[pos[source]] == band[index]:
                raise PlanCompileError(
                    f"{where}: context=from_step({source!r}) reads a sibling in the same parallel band; "
                    "siblings run concurrently and cannot see each other's output"
                )
            c.source, c.source_index = _STEP, pos[source]

        # routing
        targets_named = step.route_targets
        kind_of = "routes_by value" if step.routes_by is not None else "route target"
        for target in targets_named:
            if target not in pos:
                raise PlanCompileError(f"{where}: {kind_of} {target!r} is not a step{_hint(target, names)}")
            if band[pos[target]] >= 0:
                raise PlanCompileError(
                    f"{where}: {kind_of} {target!r} is a parallel=True step; routing into a parallel band is "
                    "not supported (nest the band in a Plan and route to that step instead)"
                )
        if step.after_branches is not None:
            rejoin = step.after_branches
            if rejoin not in pos:
                raise PlanCompileError(f"{where}: after_branches={rejoin!r} is not a step{_hint(rejoin, names)}")
            if pos[rejoin] <= index:
                raise PlanCompileError(
                    f"{where}: after_branches={rejoin!r} must come after the routing step in declared order "
                    f"({step.name!r} is at position {index}, {rejoin!r} at {pos[rejoin]})"
                )
            if band[pos[rejoin]] >= 0:
                raise PlanCompileError(
                    f"{where}: after_branches={rejoin!r} is a parallel=True step; rejoin on a sequential step"
                )
            for target in targets_named:
                if not index < pos[target] <= pos[rejoin]:
                    raise PlanCompileError(
                        f"{where}: with after_branches={rejoin!r}, every branch must be declared between "
                        f"{step.name!r} and {rejoin!r} (or be {rejoin!r}); {target!r} is at position {pos[target]}"
                    )
            c.rejoin = pos[rejoin]
            c.rejoin_why = f"after_branches={rejoin!r} of {step.name!r}"
        else:
            trapped = [t for t in targets_named if index < pos[t] < count - 1]
            if trapped:
                message = (
                    f"{where}: forward route to {trapped} without after_branches= (the detour trap): when the "
                    f"route does not fire, linear progression still runs {trapped[0]!r}. Cover every outcome "
                    "and set after_branches='<rejoin>', or route only to the last declared step."
                )
                if strict:
                    raise PlanCompileError(message)
                warnings.warn(message, DetourTrapWarning, stacklevel=3)
        if step.routes is not None:
            c.routes = tuple(
                (pos[target], _fast(predicate), callable_name(predicate), target) for target, predicate in step.routes
            )
            c.why_linear, c.why_end = "no route matched; linear", "no route matched; end"
        elif step.routes_by is not None:
            c.by_field = step.routes_by
            c.by_map = {value: pos[value] for value in step.route_values}
            c.by_why = {value: f"routes_by {step.routes_by}={value!r}" for value in step.route_values}

    for index, c in enumerate(compiled):
        if band[index] == index:
            end = index
            while end < count and band[end] == index:
                end += 1
            c.band_end = end
            c.band_sync = all(_is_sync(m) for m in compiled[index:end])
    return tuple(compiled)


def _fast(predicate: Callable[..., Any]) -> Callable[[Envelope], Any]:
    """The plain function behind a DSL predicate (one call less per evaluation)."""
    return predicate.fn if isinstance(predicate, Predicate) else predicate


def _bind_target(step: Step, c: _Compiled, targets: Mapping[str, Any] | None) -> None:
    where = f"Step {step.name!r}"
    target = step.target
    if isinstance(target, str):
        if targets is None:
            raise PlanCompileError(f"{where}: the string target {target!r} needs Plan(targets={{{target!r}: ...}})")
        if target not in targets:
            raise PlanCompileError(
                f"{where}: target {target!r} is not in Plan(targets=...){_hint(target, sorted(targets))}"
            )
        target = targets[target]
        if isinstance(target, str):
            raise PlanCompileError(f"{where}: targets[{step.target!r}] is a string, not something to run")
    c.target = target
    if isinstance(target, Plan):
        c.kind = _PLAN
    elif isinstance(target, RoutingAgent):
        if step.output is not None:
            raise PlanCompileError(
                f"{where}: output= does not apply to a RoutingAgent step: its payload is the agent's RunResult"
            )
        c.kind, c.fn = _PROTO_ASYNC, AgentTarget(target).run_step
    elif callable(getattr(target, "run_step", None)):
        c.fn = target.run_step
        c.kind = _PROTO_ASYNC if is_awaitable_function(target.run_step) else _PROTO_SYNC
    elif callable(getattr(target, "complete_json", None)):
        c.kind = _PROTO_ASYNC
        c.fn = ChatModelTarget(target, _schema(where, step)).run_step
    elif is_awaitable_function(getattr(target, "complete", None)):
        c.kind = _PROTO_ASYNC
        c.fn = ChatCompleterTarget(target, _schema(where, step)).run_step
    elif callable(target):
        c.fn = target
        c.kind = _ASYNC if is_awaitable_function(target) else _SYNC
    else:
        raise PlanCompileError(
            f"{where}: cannot run {target!r}: a target is a callable, a RoutingAgent, a Plan, an object with "
            "run_step(payload, ctx), a structured chat model with complete_json(messages, *, schema) or a chat "
            "model with async complete(messages, *, json_mode)"
        )
    if step.adapter is not None:
        c.validate = _validator(step.adapter)
        output = step.output
        if isinstance(output, type) and (issubclass(output, BaseModel) or dataclasses.is_dataclass(output)):
            c.out_cls = output


def _schema(where: str, step: Step) -> dict[str, Any] | None:
    if step.adapter is None or step.output is str:
        return None
    try:
        return step.adapter.json_schema()
    except Exception as exc:
        raise PlanCompileError(f"{where}: cannot build a JSON schema for output={step.output!r}: {exc}") from exc


def _validator(adapter: TypeAdapter[Any]) -> Callable[[Any], Any]:
    def validate(value: Any) -> Any:
        try:
            return adapter.validate_python(value)
        except ValidationError:
            if isinstance(value, str | bytes | bytearray):  # JSON text (an LLM reply, a serialised model)
                return adapter.validate_json(value)
            raise

    return validate
