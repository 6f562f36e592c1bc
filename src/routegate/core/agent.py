"""The routing agent: Route → Validate → Delegate → (reroute) → Finalize, under budgets, with a trace.

This module is wiring: the policy boundary (:mod:`.policy`), the gateway (:mod:`.gateway`) and the router and
finalizer protocols (:mod:`.protocols`) do the work. Every run returns an :class:`~routegate.core.AgentResult` (a
:class:`~routegate.core.AgentResult` whose output is the answer); none raises for bad model output, bad input,
budgets, loops or timeouts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Generic

from opentelemetry.trace import Span

from routegate._lazy import warn_old_method
from routegate.core import stop_reasons as sr
from routegate.core._deadline import Deadline
from routegate.core._faults import fault_message
from routegate.core._stream import stream_events
from routegate.core._sync import run_sync
from routegate.core.compose import GroundedComposer
from routegate.core.context import RunContext, RunDepsT, context_parameter
from routegate.core.contracts import (
    ABSENT,
    OBSERVATION_STATUSES,
    Budget,
    HistoryEntry,
    RouteIntent,
    RouteSpec,
    TraceEntry,
)
from routegate.core.events import FinalEvent, RunEvent
from routegate.core.gateway import RouteGateway
from routegate.core.governed import (
    GovernedStep,
    OnRefusal,
    Stopped,
    as_mapping,
    phase_of,
    refusal_observation,
    refusals_exhausted,
    refused_route,
)
from routegate.core.messages import MAX_REQUEST_CHARS, InvalidMessageError, check_message, text_problem
from routegate.core.outcome import Outcome
from routegate.core.policy import RoutePolicy
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
from routegate.core.provenance import OutputCheck, needs_sources
from routegate.core.result import AgentResult
from routegate.core.telemetry import Attr, decision_attributes, end_run
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError

logger = logging.getLogger(__name__)

Emit = Callable[[RunEvent], None]
MAX_GOAL_CHARS = MAX_REQUEST_CHARS  # the one message rule (routegate.core.messages), with this bound
_SUCCESS = Outcome.success()


def _record_decision(routed: Span, answered: object) -> None:
    """Mark the ``routegate.route`` span with the router's decision: its layer and scores."""
    if isinstance(answered, RouteDecision):
        routed.set_attributes(decision_attributes(answered.decided_by, answered.scores))


class _Run:
    """One run's state beyond its :class:`RunContext`: the goal, phase, history and trace; ends as a result."""

    __slots__ = ("ctx", "goal", "history", "phase", "started", "task", "trace")

    def __init__(self, goal: str, ctx: RunContext[Any], task: str | None = None) -> None:
        self.goal = goal
        self.ctx = ctx
        self.task = task
        self.started = time.perf_counter()
        self.phase: sr.Phase = "route"
        self.history: list[HistoryEntry] = []
        self.trace: list[TraceEntry] = []

    def ended(self, root: Span, result: AgentResult) -> None:
        """Record how the run ended on its root span."""
        end_run(
            root,
            result.stop_reason,
            result.phase,
            **{
                Attr.ROUTE: result.selected_route or (result.route.target if result.route else None),
                Attr.ATTEMPTS: len(result.trace),
                Attr.DELEGATIONS: self.ctx.ledger.delegations,
            },
        )

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0

    def failed(self, exc: Exception, **fields: Any) -> AgentResult:
        """The agent's one fault boundary for its parts: the router (phase ``route``) or the finalizer (phase
        ``finalize``) raised ``exc``. A :class:`RunStopError` is its own stop; anything else is a fault, reported by
        its class only (``router_error:<Exc>`` / ``finalize_error:<Exc>``; text and traceback to the log)."""
        if isinstance(exc, RunStopError):
            return self.stop(exc.stop_reason, exc.message, phase=phase_of(exc.phase), **fields)
        if self.phase == "finalize":
            return self.stop(sr.finalize_error(exc), fault_message(exc, "the finalizer", logger), **fields)
        return self.stop(sr.router_error(exc), fault_message(exc, "the router", logger), **fields)

    def stop(self, stop_reason: str, message: str, *, phase: sr.Phase | None = None, **fields: Any) -> AgentResult:
        return AgentResult(
            Outcome(False, stop_reason, phase or self.phase, message),
            None,
            tuple(self.trace),
            self.ctx.run_id,
            self.elapsed_ms(),
            self.goal,
            history=tuple(self.history),
            **fields,
        )


class RoutingAgent(Generic[RunDepsT]):
    """A governed routing agent over a set of workers.

    Generic over the type of the ``deps`` its runs take, for the type checker: runs of ``RoutingAgent[MyDeps](...)``
    take ``deps: MyDeps`` (unsubscripted: any). A worker, router or finalizer that declares
    ``ctx: RunContext[MyDeps]`` receives them as ``ctx.deps``.

    ``policy_allow`` is the allowlist the policy boundary applies to router decisions
    (``invalid_route:route_not_allowed:<t>``); ``execution_allow`` is the gateway's, applied again at
    execution (``route_denied:<t>``). Both default to the workers' names; anything else is denied.

    Each route attempt is one :class:`~routegate.core.governed.GovernedStep` (validate → delegate → check → trace). A
    worker, the router or the finalizer that declares a :class:`~routegate.core.RunContext` parameter gets the
    run's context (``deps=`` of :meth:`arun` is its ``deps``).

    ``on_refusal`` says what a policy refusal (``invalid_route:*``, ``route_denied:provenance:*``, or the output
    check's ``output_denied:*``) does: ``"end"`` (the default) ends the run with it; ``"observe"`` hands it to
    the router as an observation (``{"status": "refused", "stop_reason", "message"}`` in the history, one trace
    entry) and the run goes on within its budgets — if they run out, the run ends with the last refusal's stop
    reason. A refused decision runs nothing, so it uses a route attempt but no delegation.

    ``output_check(answer, ctx)`` sees the final answer before it leaves the run: ``None`` lets it go, a short
    reason refuses it (``output_denied:<reason>``, phase ``finalize``). When a worker declares flow rules or an
    output check is set, the run keeps a provenance ledger (``ctx.provenance``): the goal as ``user``, the
    ``context`` mapping as ``config``, every observation as ``tool:<worker>#<n>``.
    """

    def __init__(
        self,
        *,
        workers: Sequence[Worker],
        router: Router,
        finalizer: Finalizer | None = None,
        budget: Budget | None = None,
        policy_allow: Iterable[str] | None = None,
        execution_allow: Iterable[str] | None = None,
        name: str = "routing-agent",
        on_refusal: OnRefusal = "end",
        output_check: OutputCheck | None = None,
    ) -> None:
        if on_refusal not in ("end", "observe"):
            raise ConfigurationError(f"on_refusal must be 'end' or 'observe', got {on_refusal!r}")
        if output_check is not None and not callable(output_check):
            raise ConfigurationError(f"output_check must be callable, got {type(output_check).__name__}")
        if not isinstance(router, Router):
            raise ConfigurationError(f"router must have an async decide(request) method, got {type(router).__name__}")
        names = [w.name for w in workers]
        self.name = name
        self.router = router
        self.finalizer: Finalizer = finalizer or GroundedComposer()
        self.budget = budget or Budget()
        self.gateway = RouteGateway(allow=names if execution_allow is None else execution_allow, registry=workers)
        allowed = frozenset(names if policy_allow is None else policy_allow)
        self.policy = RoutePolicy(allowed, {w.name: w.schema for w in workers})
        self.step = GovernedStep(self.policy, self.gateway)
        self.on_refusal: OnRefusal = on_refusal
        self.output_check = output_check
        self._tracks = (
            self.step.tracks_provenance
            or output_check is not None
            or needs_sources(self.finalizer, *(w.fn for w in workers))
        )
        self.catalog = tuple(
            RouteSpec(w.name, w.description, w.schema.model_json_schema()) for w in workers if w.name in allowed
        )
        self._router_ctx = context_parameter(router.decide)
        self._finalizer_ctx = context_parameter(self.finalizer.finalize)

    # -- public API ------------------------------------------------------------------------------------------
    async def arun(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
    ) -> AgentResult:
        """Run one request to its end and return how it ended."""
        return await self._execute(goal, context or {}, deps, None)

    def run(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # see arun
    ) -> AgentResult:
        """Synchronous :meth:`arun` (not from inside a running event loop)."""
        return run_sync(self._execute(goal, context or {}, deps, None), what="run")

    def iter(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # see arun
    ) -> AsyncIterator[RunEvent]:
        """Run one request, yielding its events as they happen; the last one is a :class:`FinalEvent`.

        Closing the iterator early cancels the run.
        """
        given = context or {}
        return stream_events(lambda emit: self._execute(goal, given, deps, emit), _is_final)

    def astream(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # see arun
    ) -> AsyncIterator[RunEvent]:
        """Deprecated: :meth:`iter` under its old name (warns)."""
        warn_old_method("RoutingAgent", "astream", "iter")
        return self.iter(goal, context=context, deps=deps)

    async def _arun_within(self, goal: str, outer: RunContext[Any], task: str | None = None) -> AgentResult:
        """Run as a part of the run ``outer`` (a step of a plan): one run, not two.

        The agent's run has the outer run's id, deadline (what is left of it: the outer run's timer cuts the agent
        off, and its own ``budget.max_seconds`` does not apply), delegation ledger (its delegations count against
        the outer run's ``max_delegations``, and its loop guard sees the outer run's calls), provenance ledger
        (when the outer run keeps one), tracer (its span sits under the outer run's open span) and ``deps``. It
        sends no events of its own. ``task`` is the step's instruction, read by routers and finalizers as
        ``RouteRequest.task`` / ``FinalizeRequest.task``. Its ``max_route_attempts`` still bounds it."""
        ctx = RunContext(
            outer.deps, outer.run_id, outer.deadline, outer.ledger, None, outer.tracer, outer.provenance, outer.spans
        )
        return await self._execute(goal, {}, outer.deps, None, ctx, task)

    # -- the loop --------------------------------------------------------------------------------------------
    async def _execute(
        self,
        goal: str,
        context: Mapping[str, Any],
        deps: RunDepsT,
        emit: Emit | None,
        within: RunContext[Any] | None = None,
        task: str | None = None,
    ) -> AgentResult:
        """The run; ``within``: the context of the outer run this one is part of (no deadline of its own)."""
        ctx = RunContext.start(deps, self.budget, emit=emit) if within is None else within
        run = _Run(goal if isinstance(goal, str) else "", ctx, task)
        # a run of its own answers to its own timer; a nested one to the outer run's
        body = self._bounded if within is None else self._loop
        result = await ctx.spans.run(ctx.run_id, body(run, goal, context), run.ended)
        logger.info(
            "run %s route=%s stop_reason=%s latency_ms=%.2f",
            result.run_id,
            result.selected_route or (result.route.target if result.route else None),
            result.stop_reason,
            result.elapsed_ms,
        )
        if emit is not None:
            emit(FinalEvent(result))
        return result

    async def _bounded(self, run: _Run, goal: str, context: Mapping[str, Any]) -> AgentResult:
        """The run under its deadline (``max_seconds``)."""
        deadline = Deadline(self.budget.max_seconds)
        try:
            async with deadline:
                return await self._loop(run, goal, context)
        except TimeoutError:
            if not deadline.expired:
                raise
            return run.stop(
                sr.MAX_SECONDS,
                f"max_seconds={self.budget.max_seconds} reached after {run.elapsed_ms() / 1000:.3f}s "
                f"in phase {run.phase!r}",
            )

    async def _loop(self, run: _Run, goal: object, context: Mapping[str, Any]) -> AgentResult:
        try:
            goal = check_message(goal, max_chars=MAX_GOAL_CHARS)
        except InvalidMessageError as bad_goal:
            return _refused_goal(run, goal, bad_goal)
        budget = self.budget
        history, trace, ctx = run.history, run.trace, run.ctx
        spans = ctx.spans
        if self._tracks:  # the step's instruction, like the caller's context, is configuration
            self.step.admit(ctx, goal, context if run.task is None else {"task": run.task}, always=True)
        observe = self.on_refusal == "observe"
        refused: list[Outcome] = []
        previous: HistoryEntry | None = None  # the last delegation: a refusal handed back does not lift its guard
        for attempt in range(1, budget.max_route_attempts + 1):
            forbidden = (
                frozenset({previous.route.target})
                if previous is not None and previous.status == "needs_reroute"
                else frozenset()
            )
            run.phase = "route"
            request = RouteRequest(
                goal=goal,
                catalog=self.catalog,
                history=tuple(history),
                forbidden_targets=forbidden,
                attempt=attempt,
                budget=budget,
                context=context,
                task=run.task,
            )
            try:
                decided = self.router.decide(request) if self._router_ctx is None else self._decide(request, ctx)
                answered: object = await spans.route(attempt, decided, _record_decision)
            except Exception as exc:  # RunStopError included: Run.failed tells a stop from a fault
                return run.failed(exc)
            # a router that returns a bare value instead of a RouteDecision is tolerated: it is all untrusted
            decision = answered if isinstance(answered, RouteDecision) else RouteDecision(raw=answered)
            step = self.step
            started = time.perf_counter()
            verdict = step.validate(decision, ctx, attempt, previous, started)
            if isinstance(verdict, Stopped):
                trace.append(verdict.trace)
                outcome = verdict.outcome
                if observe:
                    refused.append(outcome)
                    history.append(
                        HistoryEntry(
                            attempt, verdict.intent or refused_route(decision.raw), refusal_observation(outcome)
                        )
                    )
                    continue
                return run.stop(outcome.stop_reason, outcome.message, phase=outcome.phase, raw_route=decision.raw)
            run.phase = "delegate"
            done = await step.delegate(verdict, ctx, attempt, decision, started)
            trace.append(done.trace)
            if isinstance(done, Stopped):
                outcome = done.outcome
                if done.value is ABSENT:
                    return run.stop(outcome.stop_reason, outcome.message, phase=outcome.phase, route=verdict)
                entry = as_mapping(done.value)
                if entry is not None:
                    history.append(HistoryEntry(attempt, verdict, entry))
                return run.stop(
                    outcome.stop_reason,
                    outcome.message,
                    route=verdict,
                    expected_statuses=OBSERVATION_STATUSES,
                    received_status=done.status,
                    bad_observation=done.value,
                )
            assert done.observation is not None  # the status check accepts mappings only
            previous = HistoryEntry(attempt, verdict, done.observation)
            history.append(previous)
            if done.status == "needs_reroute":
                continue
            finished = await self._finalize(run, goal, verdict, context, attempt, observe=observe)
            if isinstance(finished, AgentResult):
                return finished
            refused.append(finished)  # the output check refused the answer: the router gets another try
            history.append(HistoryEntry(attempt, verdict, refusal_observation(finished)))
        if refused:
            ended = refusals_exhausted(refused, budget.max_route_attempts)
            return run.stop(ended.stop_reason, ended.message, phase=ended.phase)
        return run.stop(
            sr.MAX_ROUTE_ATTEMPTS,
            f"max_route_attempts={budget.max_route_attempts} used up without a 'done' observation",
            phase="route",
        )

    def _finish(self, request: FinalizeRequest, ctx: RunContext[Any]) -> Awaitable[str | FinalAnswer]:
        if self._finalizer_ctx is None:
            return self.finalizer.finalize(request)
        return self.finalizer.finalize(request, **{self._finalizer_ctx: ctx})

    def _decide(self, request: RouteRequest, ctx: RunContext[Any]) -> Awaitable[object]:
        if self._router_ctx is None:
            return self.router.decide(request)
        return self.router.decide(request, **{self._router_ctx: ctx})

    async def _finalize(
        self,
        run: _Run,
        goal: str,
        route: RouteIntent,
        context: Mapping[str, Any],
        attempt: int,
        *,
        observe: bool,
    ) -> AgentResult | Outcome:
        """The final answer; an :class:`Outcome` when the output check refused it and ``observe`` is set."""
        run.phase = "finalize"
        request = FinalizeRequest(goal, route.target, tuple(run.history), context, run.task)
        try:
            finishing = (
                self.finalizer.finalize(request) if self._finalizer_ctx is None else self._finish(request, run.ctx)
            )
            answer: object = await run.ctx.spans.finalize(finishing)
        except Exception as exc:
            return run.failed(exc, route=route)
        extra: Mapping[str, Any] = {}
        if isinstance(answer, FinalAnswer):
            extra = answer.extra
            answer = answer.text
        if not isinstance(answer, str) or not answer.strip():
            return run.stop(sr.LLM_EMPTY, "the finalizer returned an empty answer", route=route)
        if self.output_check is not None:
            denied = self._check_output(run, answer, route, attempt)
            if denied is not None:
                return denied if observe else run.stop(denied.stop_reason, denied.message, route=route)
        return AgentResult(
            _SUCCESS,
            answer.strip(),
            tuple(run.trace),
            run.ctx.run_id,
            run.elapsed_ms(),
            run.goal,
            selected_route=route.target,
            history=tuple(run.history),
            route=route,
            extra=extra,
        )

    def _check_output(self, run: _Run, answer: str, route: RouteIntent, attempt: int) -> Outcome | None:
        """The output check's verdict on ``answer`` (a refusal is one trace entry); a check that raises refuses."""
        assert self.output_check is not None
        started = time.perf_counter()
        try:
            reason = self.output_check(answer, run.ctx)
        except Exception as exc:  # a check that raises refuses: the fault by its class, its text to the log
            fault_message(exc, "the output check", logger)
            reason = f"check_error:{type(exc).__name__}"
        if reason is None:
            return None
        stop = sr.output_denied(str(reason))
        run.trace.append(
            TraceEntry(
                attempt,
                route.target,
                ok=False,
                phase="finalize",
                elapsed_ms=round((time.perf_counter() - started) * 1000.0, 3),
                stop_reason=stop,
            )
        )
        return Outcome(False, stop, "finalize", f"the output check refused the answer ({sr.safe_detail(str(reason))})")


def _refused_goal(run: _Run, goal: object, refused: InvalidMessageError) -> AgentResult:
    """The stop of a goal the message rule refused: ``invalid_goal:empty`` / ``too_long`` / ``invalid_text``."""
    if refused.code == "message_too_long":
        assert isinstance(goal, str)
        return run.stop("invalid_goal:too_long", f"the request has {len(goal)} characters, over {MAX_GOAL_CHARS}")
    if refused.code == "invalid_text":
        assert isinstance(goal, str)
        problem = text_problem(goal)
        assert problem is not None
        return run.stop("invalid_goal:invalid_text", f"the request {problem[1]}")
    return run.stop("invalid_goal:empty", "the request is empty: send a non-blank text")


def _is_final(event: RunEvent) -> bool:
    return isinstance(event, FinalEvent)


__all__ = ["RoutingAgent"]
