"""Plan compilation: everything a run needs, worked out once when the plan is built.

Each :class:`~routegate.plan.Step` becomes a :class:`Compiled` record — target kind and callable, input source,
validator, route table of ``(index, predicate, why, name)``, ``routes_by`` map, rejoin point, parallel band —
after the graph checks that raise :class:`~routegate.plan.PlanCompileError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from difflib import get_close_matches
from enum import IntEnum
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from routegate.core.context import context_parameter
from routegate.plan._shape import PlanShape, StepShape
from routegate.plan.envelope import Envelope
from routegate.plan.errors import DetourTrapWarning, PlanCompileError
from routegate.plan.sentinels import FromParallel, FromParallelAll, FromPrev, FromStart
from routegate.plan.step import Step
from routegate.plan.targets import ChatCompleterTarget, ChatModelTarget, is_awaitable_function
from routegate.plan.when import Predicate, callable_name


class Kind(IntEnum):
    """How a step's target is called. The values are part of a plan's checkpoint fingerprint: never renumber."""

    SYNC = 0  # a plain synchronous callable
    ASYNC = 1  # a plain async callable
    PROTO_SYNC = 2  # an object with a synchronous run_step(payload, ctx)
    PROTO_ASYNC = 3  # an object with an async run_step (a RoutingAgent, a chat model)
    PLAN = 4  # a nested Plan
    CTX_SYNC = 5  # a plain synchronous callable that declares a RunContext parameter
    CTX_ASYNC = 6  # a plain async callable that declares a RunContext parameter


class Source(IntEnum):
    """Where a step's input comes from. The values are part of a plan's checkpoint fingerprint: never renumber."""

    PREV = 0  # the previous step's payload
    START = 1  # the run's input
    STEP = 2  # an earlier step's payload (source_index)
    BAND = 3  # every member of the band starting at source_index


# module-level names: one global lookup on the run loop's comparisons
SYNC, ASYNC, PROTO_SYNC, PROTO_ASYNC, PLAN, CTX_SYNC, CTX_ASYNC = Kind
DIRECT = frozenset({SYNC, CTX_SYNC, PROTO_SYNC})  # called without awaiting anything
PREV, START, STEP, BAND = Source


class Compiled:
    """One step as the run loop sees it: everything precomputed."""

    __slots__ = (
        "band_end",
        "band_sync",
        "by_field",
        "by_map",
        "by_why",
        "ctx_param",
        "ctx_positional",
        "direct",
        "fn",
        "index",
        "kind",
        "name",
        "out_cls",
        "phase",
        "rejoin",
        "rejoin_why",
        "returns_stops",
        "routes",
        "source",
        "source_end",
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
        self.phase = step.phase
        self.kind: Kind = SYNC
        self.direct = True
        # in a runtime's plan, a RunStopError the target returns ends the run as one it raised would
        self.returns_stops = False
        self.ctx_param: str | None = None  # the target's RunContext parameter
        self.ctx_positional = False  # the RunContext parameter is the second positional one (a run_step's: its ctx)
        self.fn: Callable[..., Any] = _identity
        self.target: Any = step.target
        self.source: Source = PREV
        self.source_index = -1
        self.source_end = -1  # BAND: the index after the band
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
        # the routing decision of a run that goes on linearly / ends after this step (one tuple, shared by runs)
        self.why_linear: tuple[None, str] = (None, "linear")
        self.why_end: tuple[None, str] = (None, "end")


def _identity(value: Any) -> Any:  # placeholder fn for kinds that call none (nested plans)
    return value


def is_sync(step: Compiled) -> bool:
    """True when running the step can never suspend (a sync callable or step target, an all-sync plan)."""
    if step.kind == PLAN:
        return bool(step.target._all_sync)
    return step.direct


def wants_context(step: Compiled) -> bool:
    """True when the step needs the run's RunContext (a context parameter, a step target, such a nested plan)."""
    if step.kind == PLAN:
        return bool(step.target._wants_ctx)
    return step.ctx_param is not None or step.kind in (PROTO_SYNC, PROTO_ASYNC)


def fingerprint(steps: tuple[Compiled, ...]) -> str:
    """A hash of what decides where a run goes: step names, targets, inputs, writes, routes, bands, outputs.

    A durable run's checkpoint records it, and a resume refuses a checkpoint of another fingerprint. The text
    hashed is the one every release since durable runs wrote (kinds and sources as plain integers)."""
    parts: list[str] = []
    for c in steps:
        target = c.target
        if c.kind == PLAN:
            ident = "plan:" + fingerprint(target._compiled)
        else:
            fn = getattr(target, "__func__", target)
            ident = f"{getattr(fn, '__module__', '')}:{getattr(fn, '__qualname__', type(fn).__qualname__)}"
        routes = [name for _, _, _, name in c.routes] if c.routes is not None else None
        out = None if c.out_cls is None else f"{c.out_cls.__module__}.{c.out_cls.__qualname__}"
        parts.append(
            repr(
                (
                    c.name,
                    int(c.kind),
                    ident,
                    int(c.source),
                    c.source_index,
                    c.writes,
                    routes,
                    c.by_field,
                    sorted(c.by_map.items()),
                    c.rejoin,
                    c.band_end,
                    out,
                )
            )
        )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def shape_of(steps: tuple[Compiled, ...]) -> PlanShape:
    """What a durable run's checkpoints know of the plan compiled as ``steps`` (see :mod:`routegate.plan._shape`)."""
    return PlanShape(
        tuple(
            StepShape(
                c.name,
                c.index,
                c.band_end,
                c.writes,
                c.validate,
                frozenset(t for t, _, _, _ in c.routes) if c.routes is not None else frozenset(),
                frozenset(c.by_map.values()) if c.by_field is not None else frozenset(),
                c.rejoin,
                c.rejoin_why,
            )
            for c in steps
        ),
        fingerprint(steps),
    )


# -- compilation ---------------------------------------------------------------------------------------------------
def _hint(name: str, known: list[str]) -> str:
    close = get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else f"; known steps: {known}"


def compile_steps(
    steps: tuple[Step, ...],
    targets: Mapping[str, Any] | None,
    strict: bool,
    plan_type: type,
    returns_stops: bool = False,
) -> tuple[Compiled, ...]:
    """Check the graph (PlanCompileError, DetourTrapWarning) and compile every step; ``plan_type`` is Plan,
    ``returns_stops`` a runtime's (:attr:`routegate.plan.Runtime.returns_stops`)."""
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

    compiled = [Compiled(step, index) for index, step in enumerate(steps)]
    for index, (step, c) in enumerate(zip(steps, compiled, strict=True)):
        where = f"Step {step.name!r}"
        _bind_target(step, c, targets, plan_type)
        c.returns_stops = returns_stops

        # input sentinel
        context = step.context
        if isinstance(context, FromPrev):
            c.source = PREV
        elif isinstance(context, FromStart):
            c.source = START
        else:
            source = context.name
            if source not in pos:
                raise PlanCompileError(f"{where}: context={context!r} names an unknown step{_hint(source, names)}")
            if pos[source] >= index:
                raise PlanCompileError(
                    f"{where}: context={context!r} must name a step declared earlier "
                    f"({source!r} is at position {pos[source]}, {step.name!r} at {index})"
                )
            if band[index] >= 0 and band[pos[source]] == band[index]:
                raise PlanCompileError(
                    f"{where}: context={context!r} reads a sibling in the same parallel band; "
                    "siblings run concurrently and cannot see each other's output"
                )
            if isinstance(context, FromParallel) and band[pos[source]] < 0:
                raise PlanCompileError(
                    f"{where}: context={context!r} names a step that is not parallel=True; use from_step({source!r})"
                )
            if isinstance(context, FromParallelAll) and band[pos[source]] != pos[source]:
                first = band[pos[source]]
                hint = f"; the band starts at {names[first]!r}" if first >= 0 else " (it is not parallel=True)"
                raise PlanCompileError(
                    f"{where}: context={context!r} must name the first step of a parallel band{hint}"
                )
            c.source = BAND if isinstance(context, FromParallelAll) else STEP
            c.source_index = pos[source]
            if c.source == BAND:
                end = pos[source]
                while end < count and band[end] == pos[source]:
                    end += 1
                c.source_end = end

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
            c.why_linear, c.why_end = (None, "no route matched; linear"), (None, "no route matched; end")
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
            c.band_sync = all(is_sync(m) for m in compiled[index:end])
    return tuple(compiled)


def _fast(predicate: Callable[..., Any]) -> Callable[[Envelope], Any]:
    """The plain function behind a DSL predicate (one call less per evaluation)."""
    return predicate.fn if isinstance(predicate, Predicate) else predicate


def _bind_target(step: Step, c: Compiled, targets: Mapping[str, Any] | None, plan_type: type) -> None:
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
    if isinstance(target, plan_type):
        runtime = getattr(target, "runtime", None)
        if runtime is not None:  # a runtime's own plan takes the runtime's run state, not a payload
            owner = runtime.owner
            raise PlanCompileError(f"{where}: {target!r} is the plan of a {owner}; make the {owner} itself the step")
        c.kind = PLAN
    elif callable(getattr(target, "run_step", None)):
        if step.output is not None and isinstance(getattr(target, "plan", None), plan_type):
            raise PlanCompileError(  # a runtime built as a plan (a RoutingAgent): its step is a nested run
                f"{where}: output= does not apply to a {type(target).__name__} step: its payload is the run's RunResult"
            )
        c.fn = target.run_step
        c.kind = PROTO_ASYNC if is_awaitable_function(target.run_step) else PROTO_SYNC
        c.ctx_param = context_parameter(c.fn)
        c.ctx_positional = c.ctx_param is not None and _position(c.fn, c.ctx_param) == 1
    elif callable(getattr(target, "complete_json", None)):
        c.kind = PROTO_ASYNC
        c.fn = ChatModelTarget(target, _schema(where, step)).run_step
    elif is_awaitable_function(getattr(target, "complete", None)):
        c.kind = PROTO_ASYNC
        c.fn = ChatCompleterTarget(target, _schema(where, step)).run_step
    elif callable(target):
        c.fn = target
        c.kind = ASYNC if is_awaitable_function(target) else SYNC
        c.ctx_param = context_parameter(target)
        if c.ctx_param is not None:
            position = _position(target, c.ctx_param)
            c.ctx_positional = position == 1
            if position == 0:
                raise PlanCompileError(
                    f"{where}: the RunContext parameter {c.ctx_param!r} of {callable_name(target)} is its first "
                    "parameter, where the step's input payload goes; declare the payload first: "
                    "def step(payload, ctx: RunContext)"
                )
            c.kind = CTX_ASYNC if c.kind == ASYNC else CTX_SYNC
    else:
        raise PlanCompileError(
            f"{where}: cannot run {target!r}: a target is a callable, a RoutingAgent, a Plan, an object with "
            "run_step(payload, ctx), a structured chat model with complete_json(messages, *, schema) or a chat "
            "model with async complete(messages, *, json_mode)"
        )
    c.direct = c.kind in DIRECT
    if step.adapter is not None:
        c.validate = _validator(step.adapter)
        output = step.output
        if isinstance(output, type) and (issubclass(output, BaseModel) or dataclasses.is_dataclass(output)):
            c.out_cls = output


def _position(fn: Callable[..., Any], name: str) -> int:
    """The position of ``fn``'s parameter ``name`` among its positional parameters (-1: keyword-only)."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in inspect.signature(fn).parameters.values() if p.kind in positional]
    return names.index(name) if name in names else -1


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
