"""Dispatch: a handler registry keyed by kind, and every dispatch through the core policy boundary.

Each extracted part becomes a route decision proposed typed (:meth:`~routegate.core.RouteDecision.proposed`: its
target and args are still untrusted and checked as a raw ``{"kind": "route", ...}`` decision would be) with a
target named by its handler (``code:python``, ``mcp:github/list_issues``, ``a2a:reviewer``). Each part is one
:class:`~routegate.core.governed.GovernedStep`, exactly as a router's decision is in the routing agent: validated by
:class:`~routegate.core.RoutePolicy` (allowlist + the target's pydantic argument schema), then delegated through
:class:`~routegate.core.RouteGateway` (execution allowlist, registry, ``max_delegations``, loop detection,
worker signature) under the dispatch's :class:`~routegate.core.RunContext`, one per dispatch. So refusals carry the
core stop reasons (``invalid_route:route_not_allowed:<t>``, ``route_denied:<t>``, ``route_missing:<t>``,
``max_delegations``, ``loop_detected``, ``max_seconds``...), and a handler's own failures carry theirs
(``sandbox_timeout:cpu``, ``tool_error:<t>``, ``a2a_timeout:<agent>``...).

A dispatch is a run of the dispatcher's :class:`~routegate.plan.Plan` (``TechniqueDispatcher.plan``, built once
per dispatcher), a runtime on the engine's public seam (:class:`~routegate.plan.Runtime`), with two steps:

* ``validate`` — all or none: every part of the output is checked before the first one runs — the policy
  (allowlist, argument bounds, schema), then the gateway's guards (``max_delegations``, execution allowlist,
  registry, loop detection, worker signature), then the handler's own argument check (an MCP tool's
  ``inputSchema``) — and one refusal refuses the whole output;
* ``delegate`` — the parts run in document order and the first one that does not succeed ends the dispatch.

Arguments are bounded by :class:`~routegate.core.ArgLimits` and must be JSON (they travel as JSON). The payload the
steps hand on is the dispatch's parts and their outcomes so far. The plan's budget is the dispatcher's: its
deadline (``Budget.max_seconds``) bounds the whole dispatch, and the plan's deadline stop is reported as
``max_seconds`` in phase ``delegate`` (in either step) with ``max_seconds=<s> reached after <n> part(s)``.

:meth:`TechniqueDispatcher.adispatch` never raises for anything the output holds, nor for a handler that
raises: a handler's exception while its part runs ends the part with ``route_error:<target>`` and a message
naming only the exception's class; the exception itself goes to the log (logger
``routegate.technique.dispatch``). A handler's ``route`` or argument check that raises ends the dispatch with
``route_error:<kind>`` and a report naming the dispatch and the exception's class only (the one fault-to-stop
conversion, :meth:`~routegate.plan.ErrorInfo.of`; the exception to the same log); one that raises
:class:`~routegate.errors.RunStopError` ends it with that stop reason, in phase ``route``. Each dispatch writes the
plan engine's one line per run on that logger too (``plan dispatch path=validate>delegate stop_reason=...``).
:meth:`TechniqueDispatcher.iter` streams a dispatch's events (each part's decision, delegation and observation),
the last one a :class:`~routegate.core.FinalEvent` with the :class:`DispatchResult`.

Argument provenance: flow rules on a target (``Annotated[..., From(...)]`` in its handler worker's or its
``schemas=`` model, or ``flows={target: {arg: From(...)}}``) are checked with the policy, before any part runs,
against the run's sources (:mod:`routegate.core.provenance`): a dispatch that is part of a run (``context=``) reads
and extends that run's ledger — the user's request, configuration and every tool output so far — and a dispatch on
its own labels ``request=`` (``user``) and ``config=`` (``config``) through the same
:meth:`~routegate.core.governed.GovernedStep.admit` as the routing agent. A value no allowed source holds refuses
the output, ``route_denied:provenance:<arg>``; each part's outcome carries its arguments' origins
(``provenance``). Every part that ran is a source of the run afterwards (``tool:<target>#<n>``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Self, runtime_checkable

from opentelemetry.trace import Tracer
from pydantic import BaseModel
from typing_extensions import deprecated

from routegate._lazy import warn_old_attribute
from routegate.core import stop_reasons as sr
from routegate.core._faults import ErrorInfo, fault_report
from routegate.core._sync import run_sync
from routegate.core.context import RunContext
from routegate.core.contracts import ArgLimits, Budget, RouteIntent, TraceEntry, jsonable
from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent
from routegate.core.gateway import DelegationStop, RouteGateway
from routegate.core.governed import Delegated, GovernedStep, Stopped
from routegate.core.hashing import args_hash
from routegate.core.outcome import Outcome, ReadsOutcome
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import RouteDecision
from routegate.core.provenance import From
from routegate.core.result import RunResult
from routegate.core.telemetry import Attr
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import Plan, PlanResult, Runtime, Step
from routegate.plan.runtime import RunSpans, TracedSpans
from routegate.technique._guard import (
    HandlerFailure,
    Returned,
    check_returned,
    guarded,
    returned_value,
    value_message,
    value_stop_reason,
)
from routegate.technique.types import ClassifiedOutput, OutputKind, TechniqueItem

logger = logging.getLogger(__name__)
_SUCCESS = Outcome.success()


@runtime_checkable
class TechniqueHandler(Protocol):
    """Executes one kind of extracted part. It names targets and builds workers; it never checks policy."""

    @property
    def kind(self) -> OutputKind:
        """The kind this handler serves."""
        ...

    @property
    def prefix(self) -> str:
        """The target prefix it owns: ``code`` for ``code:python``."""
        ...

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        """The target and arguments an extracted part asks for (still untrusted)."""
        ...

    def schema(self, target: str) -> type[BaseModel] | None:
        """The argument schema the policy boundary applies to ``target`` (``None``: args need only be an object)."""
        ...

    def worker(self, target: str) -> Worker | None:
        """The worker that executes an allowed ``target``, or ``None`` if this handler cannot serve it."""
        ...


@runtime_checkable
class ArgumentChecker(Protocol):
    """A handler that can check a part's arguments itself before anything runs (an MCP tool's ``inputSchema``).

    Optional: the dispatcher calls it, when a handler has it, after the policy and the gateway's guards
    accepted every part of the output and before the first part runs.
    """

    async def check_args(self, target: str, args: Mapping[str, Any]) -> RouteRejection | None:
        """``None`` when ``args`` fit ``target``; otherwise the stop reason and a message saying what is wrong."""
        ...


class HandlerRegistry:
    """Handlers keyed by kind (one per kind), also found by the prefix of a target."""

    __slots__ = ("_by_kind", "_by_prefix")

    def __init__(self, handlers: Iterable[TechniqueHandler] = ()) -> None:
        self._by_kind: dict[OutputKind, TechniqueHandler] = {}
        self._by_prefix: dict[str, TechniqueHandler] = {}
        for handler in handlers:
            self.register(handler)

    def register(self, handler: TechniqueHandler) -> None:
        if not isinstance(handler, TechniqueHandler):
            raise ConfigurationError(f"a technique handler needs kind, prefix, route, schema and worker: {handler!r}")
        if handler.kind is OutputKind.PROSE:
            raise ConfigurationError("prose is never dispatched; a handler for it would not be called")
        if handler.kind in self._by_kind:
            raise ConfigurationError(f"a handler for {handler.kind.value!r} is already registered")
        if handler.prefix in self._by_prefix or not handler.prefix or ":" in handler.prefix:
            raise ConfigurationError(f"handler prefix {handler.prefix!r} is empty, has ':' or is already taken")
        self._by_kind[handler.kind] = handler
        self._by_prefix[handler.prefix] = handler

    def get(self, kind: OutputKind) -> TechniqueHandler | None:
        return self._by_kind.get(kind)

    def for_target(self, target: str) -> TechniqueHandler | None:
        prefix, sep, _ = target.partition(":")
        return self._by_prefix.get(prefix) if sep else None

    def __iter__(self) -> Iterator[TechniqueHandler]:
        return iter(self._by_kind.values())


@dataclass(frozen=True, slots=True)
class DispatchOutcome(ReadsOutcome):
    """What happened to one extracted part: its ``target``, how it ended (``outcome``: the core
    :class:`~routegate.core.Outcome`, which ``ok``, ``stop_reason``, ``phase`` and ``message`` read) and ``value``,
    the handler's result (a ``CodeRun``, ...) if it ran."""

    target: str
    outcome: Outcome
    value: object = None
    provenance: Mapping[str, tuple[str, ...]] | None = None
    """Per argument, the sources its values were found in (``{"recipient": ("tool:read_file#1:content",)}``),
    when the target declares flow rules."""

    @classmethod
    def of(
        cls,
        target: str,
        stop_reason: str,
        phase: sr.Phase | None,
        message: str,
        value: object = None,
        provenance: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Self:
        """The part's outcome from its stop reason (``"success"``: it succeeded), phase and message."""
        outcome = _SUCCESS if stop_reason == sr.SUCCESS else Outcome(False, stop_reason, phase, message)
        return cls(target, outcome, value, provenance)

    def to_dict(self) -> dict[str, Any]:
        outcome = self.outcome
        out = outcome.detailed({"target": self.target, "stop_reason": outcome.stop_reason})
        if self.value is not None:
            out["value"] = jsonable(self.value)
        if self.provenance is not None:
            out["provenance"] = jsonable(self.provenance)
        return out


class DispatchResult(RunResult[tuple[DispatchOutcome, ...]]):
    """How a dispatch ended: a :class:`~routegate.core.RunResult` whose ``output`` is the parts' outcomes, in
    document order, up to the one that ended the dispatch; ``kind`` is the output kind dispatched. ``ok`` when
    every part of the winning kind succeeded (prose: nothing to do). ``trace`` holds one
    :class:`~routegate.core.TraceEntry` per governed step (each part delegated, or the policy's refusal).

    ``outcomes``, the old name of ``output``, still reads it with a :class:`DeprecationWarning`.
    """

    __slots__ = ("kind",)

    def __init__(
        self,
        kind: OutputKind,
        outcome: Outcome,
        output: tuple[DispatchOutcome, ...],
        trace: tuple[TraceEntry, ...],
        run_id: str | None,
        elapsed_ms: float,
    ) -> None:
        super().__init__(outcome, output, trace, run_id, elapsed_ms)
        self.kind = kind

    @property
    @deprecated("read DispatchResult.output instead", category=None)
    def outcomes(self) -> tuple[DispatchOutcome, ...]:
        """Deprecated: :attr:`output` under its old name (warns)."""
        warn_old_attribute("DispatchResult", "outcomes", "output")
        return self.output

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, **self._stop_fields()}
        out["outcomes"] = [part.to_dict() for part in self.output]
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out

    def __repr__(self) -> str:
        return f"DispatchResult(kind={self.kind.value!r}, stop_reason={self.stop_reason!r}, parts={len(self.output)})"


_Checked = tuple[RouteIntent, str]
"""A part that passed every check: its validated route and the ``args_hash`` of its arguments."""


@dataclass(slots=True, eq=False)
class _Parts:
    """The payload a dispatch's plan hands from step to step: the output's parts and their handler, the parts
    the validate step accepted, then the outcomes and trace entries of the parts so far, and ``ended``, the
    ending one of its steps chose (a refusal, a failed part, a handler's stop signal). Shared, so a run cut off
    by its deadline still tells how far it got."""

    kind: OutputKind
    handler: TechniqueHandler
    items: tuple[TechniqueItem, ...]
    outer: RunContext[Any] | None = None  # the run the dispatch is part of
    request: str | None = None  # the user's request and the caller's configuration, as sources (flow rules)
    config: Mapping[str, Any] | None = None
    checked: list[_Checked] = field(default_factory=list)
    outcomes: list[DispatchOutcome] = field(default_factory=list)
    trace: list[TraceEntry] = field(default_factory=list)
    ended: Outcome | None = None

    def stop_at(self, outcome: DispatchOutcome) -> RunStopError:
        """The dispatch ends on this part's outcome: the stop that ends the plan's run (the step returns it: a
        stop returned ends the run as one raised would, without the cost of raising)."""
        self.outcomes.append(outcome)
        return self.stop(outcome.outcome)

    def stop(self, outcome: Outcome) -> RunStopError:
        """The dispatch ends with ``outcome``: the stop that ends the plan's run."""
        self.ended = outcome
        return outcome.as_error()


DispatchEvent = DecisionEvent | DelegationEvent | ObservationEvent | FinalEvent[DispatchResult]
"""What :meth:`TechniqueDispatcher.iter` yields."""


class _DispatchRuntime(Runtime[_Parts, DispatchResult, DecisionEvent | DelegationEvent | ObservationEvent]):
    """The dispatcher's runtime: a dispatch's context (the run it is part of: its deps, run id and provenance
    ledger; the dispatcher's budget), its :class:`DispatchResult` made from the parts' outcomes, its
    ``routegate.dispatch`` root span (the kernel's policy and delegate spans hang right below it; no step spans) and
    the plan engine's log line on the dispatcher's logger. Its steps return their stops."""

    owner = "TechniqueDispatcher"
    logger = logger
    step_events = False
    returns_stops = True

    def __init__(self, dispatcher: TechniqueDispatcher) -> None:
        self._dispatcher = dispatcher

    def context(self, parts: _Parts, deps: Any, emit: Callable[[Any], None] | None) -> RunContext[Any]:
        """One context per dispatch, under the dispatcher's budget: the run it is part of lends its deps, run id
        and provenance ledger (one run, one ledger); what enters the run is labelled (flow rules)."""
        budget, outer = self._dispatcher.budget, parts.outer
        if outer is None:
            ctx: RunContext[Any] = RunContext.start(deps, budget, emit=emit)
        else:
            ctx = RunContext.start(outer.deps, budget, emit=emit, run_id=outer.run_id)
            ctx.provenance = outer.provenance
        self._dispatcher.step.admit(ctx, parts.request, parts.config)
        return ctx

    def result(self, parts: _Parts, ended: PlanResult[Any], ctx: RunContext[Any]) -> DispatchResult:
        """The dispatch's result, from the parts' outcomes and how its plan's run ended."""
        error = ended.error
        outcome = _SUCCESS if error is None else self._dispatcher._outcome(parts, error)
        return DispatchResult(
            parts.kind, outcome, tuple(parts.outcomes), tuple(parts.trace), ended.run_id, ended.elapsed_ms
        )

    def spans(self, tracer: Tracer, parts: _Parts, ctx: RunContext[Any]) -> RunSpans:
        attributes: dict[str, str | int] = {
            Attr.RUNTIME: "dispatch",
            Attr.RUN_ID: ctx.run_id,
            Attr.PARTS: len(parts.items),
            Attr.OUTPUT_KIND: parts.kind.value,
        }
        return TracedSpans(
            tracer,
            "routegate.dispatch",
            attributes,
            record=lambda done: {Attr.DELEGATIONS: ctx.ledger.delegations},
            steps=False,
        )


def _handler_stop(exc: Exception, parts: _Parts) -> Outcome:
    """How a dispatch ends when its handler's ``route`` or argument check raised: its stop signal's stop reason (in
    phase ``route``), or, for any other exception, ``route_error:<kind>`` reported by its class only — the one
    fault-to-stop conversion."""
    kind = parts.kind.value
    stop = ErrorInfo.of(exc, f"the {kind} dispatch", sr.route_error(kind), "route", logger)
    return Outcome(False, stop.stop_reason, "route", stop.message)


async def _ended_at_once(result: DispatchResult) -> AsyncIterator[DispatchEvent]:
    """The stream of a dispatch that ended before any plan ran: its final event."""
    yield FinalEvent(result)


def _part(done: Delegated | Stopped) -> DispatchOutcome:
    """The outcome of one part the governed step delegated."""
    assert done.intent is not None  # delegate() always carries the validated intent
    target, returned, evidence = done.intent.target, done.value, done.trace.provenance
    if isinstance(done, Delegated):  # the observation check passed: the part succeeded
        assert isinstance(returned, Returned)  # every worker of the dispatcher is guarded
        logger.info("technique dispatch target=%s stop_reason=%s", target, sr.SUCCESS)
        return DispatchOutcome(target, _SUCCESS, returned.value, evidence)
    if not isinstance(returned, Returned):  # the gateway refused the part, or its worker raised a stop signal
        return DispatchOutcome(target, done.outcome, provenance=evidence)
    value = returned.value  # the observation check refused it: the worker's own stop reason and message
    reason = value_stop_reason(value)
    logger.info("technique dispatch target=%s stop_reason=%s", target, reason)
    kept = None if isinstance(value, HandlerFailure) else value
    return DispatchOutcome.of(target, reason, "delegate", value_message(value), kept, evidence)


class TechniqueDispatcher:
    """Dispatches classified output to its handler through the policy boundary and the gateway.

    ``allow`` is the policy allowlist of targets (``invalid_route:route_not_allowed:<t>`` outside it);
    ``execution_allow`` is the gateway's, applied again at execution (``route_denied:<t>``), and defaults to
    ``allow``. ``schemas`` override a handler's argument schema per target. ``limits`` bound every part's
    arguments (default :class:`~routegate.core.ArgLimits`: depth 32, 10,000 keys and elements, 1 MB).
    ``budget.max_delegations`` bounds the parts per output, ``budget.max_seconds`` the whole dispatch.
    ``flows`` adds flow rules per target (``{"mcp:bank/send_money": {"recipient": Sensitive}}``) to those the
    target's schema declares — the way to give them to a tool whose schema is JSON (an MCP ``inputSchema``).

    Every part is one :class:`~routegate.core.governed.GovernedStep` (``step``): validated against the policy before
    any part runs, then delegated through the gateway under the dispatch's :class:`~routegate.core.RunContext`,
    which a handler's worker receives if it declares a ``RunContext`` parameter. A dispatch is a run of ``plan``,
    the dispatcher's :class:`~routegate.plan.Plan` ``validate`` → ``delegate`` under ``budget`` (a runtime on the
    engine's public seam, :class:`~routegate.plan.Runtime`).
    """

    __slots__ = ("_runtime", "budget", "gateway", "handlers", "plan", "policy", "step")

    def __init__(
        self,
        *,
        handlers: HandlerRegistry | Iterable[TechniqueHandler],
        allow: Iterable[str],
        execution_allow: Iterable[str] | None = None,
        schemas: Mapping[str, type[BaseModel]] | None = None,
        budget: Budget | None = None,
        limits: ArgLimits | None = None,
        flows: Mapping[str, Mapping[str, From]] | None = None,
    ) -> None:
        self.handlers = handlers if isinstance(handlers, HandlerRegistry) else HandlerRegistry(handlers)
        policy_allow = frozenset(allow)
        execution = policy_allow if execution_allow is None else frozenset(execution_allow)
        overrides = dict(schemas or {})
        rules = dict(flows or {})
        unknown = sorted(set(rules) - (policy_allow | execution))
        if unknown:
            raise ConfigurationError(f"flows names target(s) {unknown} that neither allowlist names")
        workers: list[Worker] = []
        checked: dict[str, type[BaseModel]] = {}
        for target in sorted(policy_allow | execution):
            handler = self.handlers.for_target(target)
            if handler is None:
                continue  # allowed but nothing serves it: route_missing:<t> when asked for
            schema = overrides.get(target) or handler.schema(target)
            found = handler.worker(target)
            if found is not None:
                if found.name != target:
                    raise ConfigurationError(f"handler for {target!r} built a worker named {found.name!r}")
                workers.append(guarded(found, schema=schema, flows=rules.get(target)))
            if schema is not None:
                checked[target] = schema
        self.policy = RoutePolicy(policy_allow, checked, limits=limits, json_only=True)
        self.gateway = RouteGateway(allow=execution, registry=workers)
        self.step = GovernedStep(self.policy, self.gateway, check=check_returned, observed=returned_value)
        self.budget = budget or Budget()
        self._runtime = _DispatchRuntime(self)
        # a deadline stop reports phase "delegate" in either step, as it always has
        self.plan: Plan[Any, _Parts] = Plan(
            Step(self._validate, name="validate", phase="delegate"),
            Step(self._delegate, name="delegate", phase="delegate"),
            budget=self.budget,
            name="dispatch",
            runtime=self._runtime,
        )

    @property
    def tracks_provenance(self) -> bool:
        """Does a target declare flow rules (so the run a dispatch is part of should keep its sources)?"""
        return self.step.tracks_provenance

    async def adispatch(
        self,
        classified: ClassifiedOutput,
        *,
        context: RunContext[Any] | None = None,
        request: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> DispatchResult:
        """Dispatch the parts of the winning kind. Never raises for anything the output holds.

        ``context`` is the run this dispatch is part of (a routing agent's, when a worker or finalizer
        dispatches): the dispatch's own context takes its ``deps``, ``run_id`` and provenance ledger (the run's
        sources, which the parts' outputs then extend); its deadline and delegation ledger come from this
        dispatcher's budget. ``request`` and ``config``: the user's request and the caller's configuration, the
        sources a flow rule may accept, for a dispatch with no run's ledger to read.
        """
        parts = self._parts(classified, context, request, config)
        if isinstance(parts, DispatchResult):  # nothing to run
            return parts
        return await self._runtime.arun(parts)

    def dispatch(
        self, classified: ClassifiedOutput, *, request: str | None = None, config: Mapping[str, Any] | None = None
    ) -> DispatchResult:
        """Synchronous :meth:`adispatch` (not from inside a running event loop)."""
        return run_sync(self.adispatch(classified, request=request, config=config), what="dispatch")

    def iter(
        self,
        classified: ClassifiedOutput,
        *,
        context: RunContext[Any] | None = None,
        request: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[DispatchEvent]:
        """:meth:`adispatch`, yielding the dispatch's events as they happen — each part's
        :class:`~routegate.core.DecisionEvent` as it is validated, then its delegation and observation — the last one
        a :class:`~routegate.core.FinalEvent` with the :class:`DispatchResult`. Closing the iterator early cancels
        the dispatch."""
        parts = self._parts(classified, context, request, config)
        if isinstance(parts, DispatchResult):
            return _ended_at_once(parts)
        return self._runtime.iter(parts)

    def _parts(
        self,
        classified: ClassifiedOutput,
        context: RunContext[Any] | None,
        request: str | None,
        config: Mapping[str, Any] | None,
    ) -> _Parts | DispatchResult:
        """What a dispatch of ``classified`` runs on, or how it ends before any plan runs (prose: nothing to do; a
        kind without a handler)."""
        kind = classified.kind
        run_id = None if context is None else context.run_id
        if kind is OutputKind.PROSE:
            return DispatchResult(kind, _SUCCESS, (), (), run_id, 0.0)
        handler = self.handlers.get(kind)
        if handler is None:
            missing = Outcome(False, sr.route_missing(kind.value), "route", f"no handler is registered for {kind}")
            return DispatchResult(kind, missing, (), (), run_id, 0.0)
        return _Parts(kind, handler, classified.items(), context, request, config)

    def _outcome(self, parts: _Parts, error: ErrorInfo) -> Outcome:
        """How the dispatch ended, from how its plan's run stopped: the ending a step chose, the deadline
        (``max_seconds`` in the phase of the step it cut off), or a fault, reported by its class only (the plan's
        fault path logged it): ``route_error:<kind>``."""
        if error.exception is not None:  # the stop's traceback holds the steps' frames (and the output's parts):
            error.exception.__traceback__ = None  # without it they are freed now, not at the next collection
        if parts.ended is not None:
            return parts.ended
        if error.stop_reason == sr.MAX_SECONDS and isinstance(error.exception, RunStopError):  # the plan's deadline
            why = f"max_seconds={self.budget.max_seconds} reached after {len(parts.outcomes)} part(s)"
            return Outcome(False, sr.MAX_SECONDS, error.phase, why)
        phase: sr.Phase = "delegate" if parts.outcomes else "route"
        kind = parts.kind.value
        return Outcome(False, sr.route_error(kind), phase, fault_report(error.type, f"the {kind} dispatch"))

    async def _validate(self, parts: _Parts, ctx: RunContext[Any]) -> _Parts | RunStopError:
        """The validate-all step: every part through the policy and the gateway's guards, then the handler's own
        argument check, into ``parts.checked``; no part runs. One refusal refuses the whole output (the policy's
        is a line of the trace); a handler's stop signal ends the dispatch in phase ``route``."""
        handler, items, checked = parts.handler, parts.items, parts.checked
        seen: set[tuple[str, str]] = set()
        validate = self.step.validate
        for attempt, item in enumerate(items, 1):
            try:
                target, args = handler.route(item)
            except Exception as exc:  # its stop signal ends the dispatch on purpose; any other is its fault
                return parts.stop(_handler_stop(exc, parts))
            verdict = validate(RouteDecision.proposed(target, args), ctx, attempt=attempt)
            if isinstance(verdict, Stopped):
                parts.trace.append(verdict.trace)
                refused = verdict.outcome
                evidence = verdict.trace.provenance
                return parts.stop_at(
                    self._refuse(checked, ctx, target, refused.stop_reason, refused.phase, refused.message, evidence)
                )
            target = verdict.target
            checked.append((verdict, ""))  # accepted by the policy: its flow-rule evidence waits for its delegation
            refusal = self._gateway_refusal(verdict, attempt - 1, len(items))
            if refusal is not None:
                return parts.stop_at(
                    self._refuse(checked, ctx, target, refusal.stop_reason, "delegate", refusal.message)
                )
            digest = args_hash(verdict.args)
            if (target, digest) in seen:
                why = f"{target!r} is asked twice with the same arguments"
                return parts.stop_at(self._refuse(checked, ctx, target, sr.LOOP_DETECTED, "delegate", why))
            seen.add((target, digest))
            checked[-1] = (verdict, digest)
        check_args = getattr(handler, "check_args", None)  # ArgumentChecker (getattr: isinstance costs ~10 µs)
        if check_args is not None:
            for intent, _ in checked:
                try:
                    rejection = await check_args(intent.target, intent.args)
                except Exception as exc:  # as for its route, above
                    return parts.stop(_handler_stop(exc, parts))
                if rejection is not None:
                    why = rejection.message
                    return parts.stop_at(self._refuse(checked, ctx, intent.target, rejection.stop_reason, "route", why))
        return parts

    async def _delegate(self, parts: _Parts, ctx: RunContext[Any]) -> _Parts | RunStopError:
        """The delegate-each step: the checked parts through the gateway, in order, until one does not succeed."""
        step, outcomes, trace = self.step, parts.outcomes, parts.trace
        for attempt, (intent, digest) in enumerate(parts.checked, 1):
            done = await step.delegate(intent, ctx, attempt=attempt, digest=digest)
            trace.append(done.trace)
            outcome = _part(done)
            if not outcome.ok:
                return parts.stop_at(outcome)
            outcomes.append(outcome)
        return parts

    def _refuse(
        self,
        checked: list[_Checked],
        ctx: RunContext[Any],
        target: str,
        stop_reason: str,
        phase: sr.Phase | None,
        message: str,
        evidence: Mapping[str, tuple[str, ...]] | None = None,
    ) -> DispatchOutcome:
        """The output is refused: the parts accepted so far will not run (their evidence is dropped)."""
        if checked:
            self.step.discard([intent for intent, _ in checked], ctx)
        return DispatchOutcome.of(target, stop_reason, phase, message, provenance=evidence)

    def _gateway_refusal(self, intent: RouteIntent, index: int, parts: int) -> DelegationStop | None:
        """The gateway's guards, checked for every part before any runs (the gateway checks them again when
        the part runs). The budget guard is worded for a whole output: nothing was called yet."""
        limit = self.budget.max_delegations
        if index >= limit:
            return DelegationStop(sr.MAX_DELEGATIONS, f"max_delegations={limit}, but the output has {parts} parts")
        return self.gateway.refusal(intent)


__all__ = [
    "ArgumentChecker",
    "DispatchOutcome",
    "DispatchResult",
    "HandlerRegistry",
    "TechniqueDispatcher",
    "TechniqueHandler",
]
