"""The routing agent: a runtime on the :class:`~routegate.plan.Plan` engine — route → govern → finalize, with reroute.

::

    route ──► govern ──► finalize          (govern → route again on needs_reroute or an observed refusal;
      ▲         │           │               finalize → route again when an observed output check refused)
      └─────────┴───────────┘

Each step is a method of the agent that reads and updates the run's :class:`_State` (the goal, history, trace and
attempts: the plan's payload). The agent is a runtime on the engine's public seam (:class:`~routegate.plan.Runtime`):
the engine owns the run — its context, deadline (a stop reports the phase of the step it cut off: ``route``,
``delegate``, ``finalize``), stops and final event — and the agent's runtime says how it ends: an
:class:`~routegate.core.AgentResult` made from the run's state and ending, a ``routegate.run`` root span, its log
line, and no step events (its stream carries the governed steps' events). A step stops the run by returning its
:class:`~routegate.errors.RunStopError` (or raising it); a fault of the router or the finalizer becomes
``router_error:<Exc>`` / ``finalize_error:<Exc>`` in the engine's one fault-to-stop conversion
(:meth:`routegate.plan.ErrorInfo.from_exception`). None raises for bad model output, bad input, budgets, loops or
timeouts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from opentelemetry.trace import Span, Tracer

from routegate._lazy import renamed_method
from routegate.core import stop_reasons as sr
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
from routegate.core.events import DecisionEvent, DelegationEvent, ObservationEvent
from routegate.core.gateway import RouteGateway
from routegate.core.governed import (
    GovernedStep,
    OnRefusal,
    Stopped,
    as_mapping,
    output_refusal,
    refusal_observation,
    refusals_exhausted,
    refused_route,
)
from routegate.core.messages import MAX_REQUEST_CHARS, goal_refusal
from routegate.core.outcome import Outcome
from routegate.core.policy import RoutePolicy
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
from routegate.core.provenance import OutputCheck, needs_sources
from routegate.core.result import AgentResult
from routegate.core.telemetry import Attr, decision_attributes
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan.envelope import Envelope
from routegate.plan.goal_doors import GoalDoors
from routegate.plan.plan import Plan
from routegate.plan.result import PlanResult
from routegate.plan.runtime import RunSpans, Runtime, TracedSpans
from routegate.plan.step import Step

logger = logging.getLogger(__name__)

MAX_GOAL_CHARS = MAX_REQUEST_CHARS  # the one message rule (routegate.core.messages), with this bound
_SUCCESS = Outcome.success()
_NO_FIELDS: Mapping[str, Any] = {}
# the fields of a stop in the finalize step, ``{"route": state.route}``, marked instead of built on every run
_ROUTE_FIELDS: Mapping[str, Any] = MappingProxyType({})
_NONE_FORBIDDEN: frozenset[str] = frozenset()


class _State:
    """One agent run's own facts, the plan's payload from step to step: the goal, the attempt, what the router
    decided, the history and trace, the refusals handed back, and what the result reports beside the stop."""

    __slots__ = (
        "again",
        "answer",
        "attempt",
        "context",
        "decision",
        "extra",
        "fields",
        "goal",
        "history",
        "previous",
        "refused",
        "route",
        "task",
        "trace",
    )

    # set by the step that first has them: again (the step just run sends the run back to the route step) by
    # govern and finalize, decision by route, route by govern, answer and extra by finalize
    again: bool
    decision: RouteDecision
    route: RouteIntent
    answer: str
    extra: Mapping[str, Any]

    def __init__(self, goal: object, context: Mapping[str, Any], task: str | None) -> None:
        self.goal: Any = goal  # checked by the route step's first attempt (the result reports "" for a non-text)
        self.context = context
        self.task = task
        self.attempt = 0
        self.previous: HistoryEntry | None = None  # the last delegation: a refusal handed back keeps its guard
        self.history: list[HistoryEntry] = []
        self.trace: list[TraceEntry] = []
        self.refused: list[Outcome] = []
        self.fields: Mapping[str, Any] = _NO_FIELDS  # what a stop reports beside its outcome (route, raw_route, ...)


def _again(env: Envelope) -> bool:
    """The route back to the route step: the step just run asks the router for another decision."""
    return env.error is None and env.payload.again


class _AgentRuntime(Runtime[_State, AgentResult, DecisionEvent | DelegationEvent | ObservationEvent]):
    """The agent's runtime: its plan's runs end with an :class:`AgentResult` made from the run's state, open a
    ``routegate.run`` root span (the steps open the kernel's own below it: ``routegate.route``,
    ``routegate.policy``, ``routegate.delegate``, ``routegate.finalize``; no step spans), log the agent's line and
    stream the governed steps' events (no step events). Its steps return their stops."""

    owner = "RoutingAgent"
    logger = logger
    step_events = False
    returns_stops = True

    def result(self, state: _State, ended: PlanResult[Any], ctx: RunContext[Any]) -> AgentResult:
        """The agent's result, from the run's state and how its plan's run ended."""
        run_id, elapsed_ms, trace = ended.run_id, ended.elapsed_ms, tuple(state.trace)
        error = ended.error
        if error is None:  # the route step checked the goal: it is text
            route = state.route
            return AgentResult(
                ended.outcome, state.answer, trace, run_id, elapsed_ms, state.goal, route.target,
                tuple(state.history), route, extra=state.extra,
            )  # fmt: skip
        fields = state.fields
        if error.stop_reason == sr.MAX_SECONDS:  # a cut-off step reports none
            fields = _NO_FIELDS
        elif fields is _ROUTE_FIELDS:
            fields = {"route": state.route}
        goal = state.goal if isinstance(state.goal, str) else ""
        return AgentResult(ended.outcome, None, trace, run_id, elapsed_ms, goal, history=tuple(state.history), **fields)

    def spans(self, tracer: Tracer, state: _State, ctx: RunContext[Any]) -> RunSpans:
        """A traced run's ``routegate.run`` root, which records the run's route, attempts and delegations."""

        def record(result: AgentResult) -> dict[str, Any]:
            return {
                Attr.ROUTE: result.selected_route or (result.route.target if result.route else None),
                Attr.ATTEMPTS: len(result.trace),
                Attr.DELEGATIONS: ctx.ledger.delegations,
            }

        attributes = {Attr.RUNTIME: "agent", Attr.RUN_ID: ctx.run_id}
        return TracedSpans(tracer, "routegate.run", attributes, record=record, steps=False)

    def log(self, result: AgentResult, ended: PlanResult[Any]) -> None:
        logger.info(
            "run %s route=%s stop_reason=%s latency_ms=%.2f",
            result.run_id,
            result.selected_route or (result.route.target if result.route else None),
            result.stop_reason,
            result.elapsed_ms,
        )


def _agent_plan(agent: RoutingAgent[Any], runtime: _AgentRuntime) -> Plan[Any, Any]:
    """The agent's plan: its steps are the agent's, under its budget. It is not a step of another plan: the agent
    is (``Step(agent)``)."""
    budget = agent.budget
    # every attempt is at most route → govern → finalize, and one more route step ends a run that used them up
    steps = max(budget.max_iterations, 3 * budget.max_route_attempts + 1)
    # only an observed refusal of the output check sends a finished answer back to the router
    back = {"route": _again} if agent._observe and agent.output_check is not None else None
    return Plan(
        Step(agent._route, name="route", phase="route"),
        Step(agent._govern, name="govern", phase="delegate", routes={"route": _again}),
        Step(agent._finalize, name="finalize", phase="finalize", routes=back),
        budget=dataclasses.replace(budget, max_iterations=steps),
        name=agent.name,
        runtime=runtime,
    )


def _record_decision(routed: Span, answered: object) -> None:
    """Mark the ``routegate.route`` span with the router's decision: its layer and scores."""
    if isinstance(answered, RouteDecision):
        routed.set_attributes(decision_attributes(answered.decided_by, answered.scores))


class RoutingAgent(GoalDoors[_State, AgentResult, DecisionEvent | DelegationEvent | ObservationEvent, RunDepsT]):
    """A governed routing agent over a set of workers.

    Generic over the type of the ``deps`` its runs take, for the type checker: runs of ``RoutingAgent[MyDeps](...)``
    take ``deps: MyDeps`` (unsubscripted: any). A worker, router or finalizer that declares
    ``ctx: RunContext[MyDeps]`` receives them as ``ctx.deps``.

    ``policy_allow`` is the allowlist the policy boundary applies to router decisions
    (``invalid_route:route_not_allowed:<t>``); ``execution_allow`` is the gateway's, applied again at
    execution (``route_denied:<t>``). Both default to the workers' names; anything else is denied.

    A run is one run of :attr:`plan`, the agent's :class:`~routegate.plan.Plan` (the agent is its
    :class:`~routegate.plan.Runtime`): ``route`` (the router decides) → ``govern`` (one :class:`~routegate.core.governed.GovernedStep`: validate → delegate → check →
    trace) → ``finalize``; ``needs_reroute`` goes back to ``route``, within ``budget.max_route_attempts``. A
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

    :meth:`iter` streams the governed steps' :class:`~routegate.core.DecisionEvent`,
    :class:`~routegate.core.DelegationEvent` and :class:`~routegate.core.ObservationEvent`, then the final event.
    As a step of a plan (``Step(agent)``), the agent's run is part of the plan's run (see :meth:`run_step`): the
    step's ``task=`` reaches the router and the finalizer as ``RouteRequest.task`` / ``FinalizeRequest.task``, and
    its ``max_route_attempts`` still bounds it.
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
        self._observe = on_refusal == "observe"
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
        self._runtime = _AgentRuntime()
        self.plan: Plan[Any, Any] = _agent_plan(self, self._runtime)
        """The agent's run as a :class:`~routegate.plan.Plan`: steps ``route``, ``govern``, ``finalize``."""

    # -- its doors (arun, run, iter, run_step: GoalDoors) --------------------------------------------------------
    def _state(self, goal: object, context: Mapping[str, Any], task: str | None) -> _State:
        return _State(goal, context, task)

    astream = renamed_method(GoalDoors.iter, "RoutingAgent", "astream")

    # -- the plan's steps ------------------------------------------------------------------------------------
    # a step ends the run by returning its RunStopError (the engine ends the run as if it were raised, without
    # the cost of raising); a router's or finalizer's own stop signal is raised inside them and caught the same way
    async def _route(self, state: _State, ctx: RunContext[Any]) -> _State | RunStopError:
        """The ``route`` step: the router decides this attempt's route (its fault: ``router_error:<Exc>``)."""
        attempt = state.attempt + 1
        if attempt == 1:
            goal = state.goal
            refused = goal_refusal(goal, MAX_GOAL_CHARS)
            if refused is not None:
                return refused
            if self._tracks:  # the step's instruction, like the caller's context, is configuration
                task = state.task
                self.step.admit(ctx, goal, state.context if task is None else {"task": task}, always=True)
        else:
            state.fields = _NO_FIELDS  # what an earlier attempt's step would have reported
            if attempt > self.budget.max_route_attempts:
                return self._used_up(state)
        state.attempt = attempt
        previous = state.previous
        forbidden = (
            frozenset({previous.route.target})
            if previous is not None and previous.status == "needs_reroute"
            else _NONE_FORBIDDEN
        )
        request = RouteRequest(
            state.goal,
            self.catalog,
            history=tuple(state.history),
            forbidden_targets=forbidden,
            attempt=attempt,
            budget=self.budget,
            context=state.context,
            task=state.task,
        )
        param = self._router_ctx
        decided = self.router.decide(request) if param is None else self.router.decide(request, **{param: ctx})
        answered: object = await ctx.spans.route(attempt, decided, _record_decision)
        # a router that returns a bare value instead of a RouteDecision is tolerated: it is all untrusted
        state.decision = answered if isinstance(answered, RouteDecision) else RouteDecision(raw=answered)
        return state

    async def _govern(self, state: _State, ctx: RunContext[Any]) -> _State | RunStopError:
        """The ``govern`` step: the policy's verdict on the decision, then the delegation and its observation."""
        decision = state.decision
        attempt = state.attempt
        step = self.step
        started = time.perf_counter()
        verdict = step.validate(decision, ctx, attempt, state.previous, started)
        if isinstance(verdict, Stopped):
            state.trace.append(verdict.trace)
            outcome = verdict.outcome
            if self._observe:
                state.refused.append(outcome)
                state.history.append(
                    HistoryEntry(attempt, verdict.intent or refused_route(decision.raw), refusal_observation(outcome))
                )
                state.again = True
                return state
            state.fields = {"raw_route": decision.raw}
            return outcome.as_error()
        done = await step.delegate(verdict, ctx, attempt, decision, started)
        state.trace.append(done.trace)
        if isinstance(done, Stopped):
            outcome = done.outcome
            if done.value is ABSENT:
                state.fields = {"route": verdict}
                return outcome.as_error()
            entry = as_mapping(done.value)
            if entry is not None:
                state.history.append(HistoryEntry(attempt, verdict, entry))
            state.fields = {
                "route": verdict,
                "expected_statuses": OBSERVATION_STATUSES,
                "received_status": done.status,
                "bad_observation": done.value,
            }
            return outcome.as_error()
        assert done.observation is not None  # the status check accepts mappings only
        state.previous = previous = HistoryEntry(attempt, verdict, done.observation)
        state.history.append(previous)
        state.route = verdict
        state.again = done.status == "needs_reroute"
        return state

    async def _finalize(self, state: _State, ctx: RunContext[Any]) -> _State | RunStopError:
        """The ``finalize`` step: the final answer, and the output check's verdict on it (its fault:
        ``finalize_error:<Exc>``)."""
        route = state.route
        state.fields = _ROUTE_FIELDS  # a stop from here on reports the route
        request = FinalizeRequest(state.goal, route.target, tuple(state.history), state.context, state.task)
        param = self._finalizer_ctx
        finishing: Awaitable[object] = (
            self.finalizer.finalize(request) if param is None else self.finalizer.finalize(request, **{param: ctx})
        )
        answer = await ctx.spans.finalize(finishing)
        extra: Mapping[str, Any] = _NO_FIELDS
        if isinstance(answer, FinalAnswer):
            extra = answer.extra
            answer = answer.text
        if not isinstance(answer, str) or not (text := answer.strip()):
            return RunStopError(sr.LLM_EMPTY, "the finalizer returned an empty answer", phase="finalize")
        if self.output_check is not None:
            denied = self._check_output(state, answer, route, ctx)
            if denied is not None:
                if not self._observe:
                    return denied.as_error()
                state.refused.append(denied)  # the router gets another try
                state.history.append(HistoryEntry(state.attempt, route, refusal_observation(denied)))
                state.again = True
                return state
        state.answer = text
        state.extra = extra  # again stays False: govern set it so, or the run would not have come here
        return state

    def _used_up(self, state: _State) -> RunStopError:
        """The stop of a run whose route attempts are used up: the last refusal's, or ``max_route_attempts``."""
        limit = self.budget.max_route_attempts
        if state.refused:
            return refusals_exhausted(state.refused, limit).as_error()
        message = f"max_route_attempts={limit} used up without a 'done' observation"
        return RunStopError(sr.MAX_ROUTE_ATTEMPTS, message, phase="route")

    def _check_output(self, state: _State, answer: str, route: RouteIntent, ctx: RunContext[Any]) -> Outcome | None:
        """The output check's verdict on ``answer`` (a refusal is one trace entry); a check that raises refuses."""
        assert self.output_check is not None
        refused = output_refusal(self.output_check, answer, ctx, state.attempt, route.target, logger)
        if refused is None:
            return None
        state.trace.append(refused.trace)
        return refused.outcome


__all__ = ["RoutingAgent"]
