"""The support desk's graph, declared as a :class:`routegate.plan.Plan` (:func:`support_plan`)::

    router ──routes_by="route"──┬─► POSTGRES ─┐
                               ├─► VECTOR   ─┤
                               ├─► EXTERNAL ─┼─► LLM   (Respond: the direct LLM route and every fallback)
                               ├─► refused ──┼─► router   (a refusal handed back: on_refusal="observe")
                               └─────────────┘

The plan is the desk runtime's (:class:`~.runtime.DeskRuntime`, the engine's :class:`~routegate.plan.Runtime`
seam): a run is one turn, its result the turn's :class:`~routegate.apps.support.contracts.TurnResult`, made from the
turn's state (:class:`~.payloads.TurnState`: the payload every step is handed, records in and hands on) and from
how the run ended. The run's budget is the desk's (``max_seconds`` is the engine's deadline, and a deadline stop
reports the phase of the step it cut off: ``route``, ``delegate`` or ``finalize``), its ``deps`` the turn's
read-only :class:`~.turn.TurnInput` (``ctx.run.deps``). Governance is the core's, composed here, not
re-implemented:

* ``router`` (:class:`RouterStep`) — the router's choice becomes a route decision that the core
  :class:`~routegate.core.governed.GovernedStep` validates (policy allowlist, argument schema); a refusal ends the
  turn with the core's ``invalid_route:*`` stop reason, or, with ``on_refusal="observe"``, goes to ``refused``,
  which hands it back to the router through the plan's route back (as the routing agent's ``govern`` goes back to
  its ``route`` step), while ``max_route_attempts`` lasts. The accepted route is sent as the ``route`` event and
  routes the plan (``routes_by="route"``); ``after_branches="LLM"`` makes the branches exclusive, rejoining at
  Respond.
* ``POSTGRES`` / ``VECTOR`` / ``EXTERNAL`` (:class:`ToolStep`) — delegate the validated route through the same
  governed step (the core gateway under the run's context and its :class:`~routegate.core.contracts.DelegationLedger`:
  execution allowlist, ``max_delegations``, loop guard, argument check, the "done" observation contract). A
  refusal, a worker that raises or an observation out of contract ends the turn with the gateway's stop reason; a
  tool error or an empty result is an ordinary observation with a ``fallback``, and the plan goes on to Respond
  (no retry, no second tool).
* ``LLM`` — the Respond node (:class:`~.respond.RespondNode`), which writes the answer.

A step ends the turn by returning its :class:`~routegate.errors.RunStopError` (the engine ends the run with it as
if it were raised, :attr:`~routegate.plan.Runtime.returns_stops`); what the step recorded before is in the state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from routegate.apps.support.contracts import ToolUsed
from routegate.apps.support.payloads import Note, TurnState
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import SupportRouter
from routegate.apps.support.runtime import DeskRuntime
from routegate.apps.support.turn import TurnInput
from routegate.core import Budget, RunContext
from routegate.core.contracts import HistoryEntry
from routegate.core.governed import (
    GovernedStep,
    OnRefusal,
    Stopped,
    refusal_observation,
    refusals_exhausted,
    refused_route,
)
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import ErrorInfo, Plan, Step, StepContext

logger = logging.getLogger(__name__)

SUPPORT_BUDGET: Final = Budget(max_route_attempts=1, max_delegations=1, max_seconds=60.0)
"""One route decision (the plan routes once), one delegation, 60 s per turn."""


def _handed_back(env: object) -> bool:
    """The route back to the router: always, from the ``refused`` step (the router decides again, or ends)."""
    return True


def support_plan(
    *,
    router: RouterStep,
    tool: ToolStep,
    respond: RespondNode,
    budget: Budget = SUPPORT_BUDGET,
    runtime: DeskRuntime | None = None,
) -> Plan[TurnState, TurnState]:
    """Router → one of POSTGRES / VECTOR / EXTERNAL → LLM; the LLM route goes straight to LLM (run once); a
    refusal handed back goes through ``refused`` back to the router. A run is one turn of ``runtime`` (a new
    :class:`~.runtime.DeskRuntime` when ``None``) under ``budget``: its ``max_seconds``, and at most the steps its
    router step's attempts allow (the router and the hand-back per attempt, then a tool and Respond)."""
    steps = 2 * max(router.max_route_attempts, budget.max_route_attempts, 1) + 1
    return Plan(
        Step(router, name="router", output=TurnState, routes_by="route", after_branches="LLM", phase="route"),
        Step(tool, name="POSTGRES", phase="delegate"),
        Step(tool, name="VECTOR", phase="delegate"),
        Step(tool, name="EXTERNAL", phase="delegate"),
        Step(hand_back, name="refused", phase="route", routes={"router": _handed_back}),
        Step(respond, name="LLM", phase="finalize"),
        budget=Budget(budget.max_route_attempts, budget.max_delegations, budget.max_seconds, max_iterations=steps),
        name="support-desk",
        runtime=runtime or DeskRuntime(),
    )


def turn_of(ctx: StepContext, payload: object) -> tuple[TurnState, RunContext[Any]]:
    """The state of the turn a step of the desk's plan runs in (its payload), and the run's context."""
    run = ctx.run
    if run is None or not isinstance(payload, TurnState) or not isinstance(run.deps, TurnInput):
        got = "no run context" if run is None else f"{type(payload).__name__} with deps {type(run.deps).__name__}"
        raise ConfigurationError(
            f"the support plan runs as its runtime's turns: a TurnState with deps=TurnInput "
            f"(routegate.apps.support.runtime.DeskRuntime), got {got} (step {ctx.step!r})"
        )
    return payload, run


class RouterStep:
    """The Router node: the router's choice, validated by the core governed step; sends the ``route`` event.

    The turn's sources are labelled first, through the governed step (:meth:`GovernedStep.admit`: the message and
    the user's earlier messages ``user``, the desk's earlier answers ``tool:memory#<n>``), when a tool declares
    flow rules. A refused decision is one trace note (``{"node": "policy", ...}``, with the arguments' origins
    when a flow rule refused it). With ``on_refusal="end"`` it ends the turn; with ``"observe"`` the run goes to the
    ``refused`` step, which hands it back here (its route is not offered again, the refusal is in the request's
    history for the LLM stage) while ``max_route_attempts`` lasts, and the turn ends with the last refusal's stop
    reason after.
    """

    def __init__(
        self, router: SupportRouter, step: GovernedStep, *, on_refusal: OnRefusal = "end", max_route_attempts: int = 1
    ) -> None:
        if on_refusal not in ("end", "observe"):
            raise ConfigurationError(f"on_refusal must be 'end' or 'observe', got {on_refusal!r}")
        self.router = router
        self.step = step
        self.observe = on_refusal == "observe"
        self.max_route_attempts = max(1, max_route_attempts)

    async def run_step(self, payload: object, ctx: StepContext) -> TurnState | RunStopError:
        state, run = turn_of(ctx, payload)
        turn = state.turn
        message = turn.message
        state.attempt += 1
        if state.attempt > self.max_route_attempts:  # the refusals handed back used the attempts up
            ended = refusals_exhausted(state.outcomes, self.max_route_attempts)
            return RunStopError(ended.stop_reason, ended.message, phase=ended.phase or "route")
        if state.attempt == 1 and self.step.tracks_provenance:
            self.step.admit(run, message, conversation=[(m.role, m.content) for m in turn.history])
        try:
            choice = await self.router.route_choice(message, turn.user_messages(), state.refused)
        except RunStopError as stop:
            return stop
        except Exception as exc:  # the engine's one fault path words it (router_error:<Exc>, class only)
            fault = ErrorInfo.from_exception(exc, ctx.step, "route", logger)
            return RunStopError(fault.stop_reason, fault.message, phase="route")
        state.choice = choice
        decision = choice.decision(message)
        verdict = self.step.validate(decision, run, attempt=state.attempt)
        if not isinstance(verdict, Stopped):
            state.intent, state.decision, state.route = verdict, decision, choice.route
            state.announce()
            return state
        outcome = verdict.outcome
        state.notes.append({"node": "policy", **verdict.trace.to_dict()})
        if not self.observe:
            return RunStopError(verdict.stop_reason, outcome.message, phase=outcome.phase or "route")
        state.outcomes.append(outcome)
        intent = verdict.intent or refused_route(decision.raw)
        state.refused.append(HistoryEntry(state.attempt, intent, refusal_observation(outcome)))
        state.route = "refused"
        return state


def hand_back(state: TurnState) -> TurnState:
    """The ``refused`` step: a refused decision goes back to the router (the plan's route back), which decides
    again without the refused route, or ends the turn when its attempts are used up."""
    return state


class ToolStep:
    """A tool node's step: delegates the route the policy accepted (the state's ``intent``) once through the core
    governed step; sends ``tool``. The worker gets the run's context (its ``deps`` is the turn) when it declares
    one."""

    def __init__(self, step: GovernedStep) -> None:
        self.step = step

    async def run_step(self, payload: object, ctx: StepContext) -> TurnState | RunStopError:
        state, run = turn_of(ctx, payload)
        intent = state.intent
        if intent is None:
            raise ConfigurationError(f"step {ctx.step!r} runs after the router accepted a route; it accepted none")
        done = await self.step.delegate(intent, run, attempt=run.ledger.delegations + 1, decision=state.decision)
        gateway: Note = {"node": "gateway", **done.trace.to_dict()}
        if isinstance(done, Stopped):
            state.notes.append(gateway)
            return RunStopError(done.stop_reason, done.outcome.message, phase=done.outcome.phase or "delegate")
        observation = done.observation
        assert observation is not None  # the "done" status check accepts mappings only
        failed = observation.get("llm_failed")
        if isinstance(failed, str):  # the text-to-SQL model failed: the offline path wrote the query
            state.notes.append({"node": "text_to_sql", "llm_failed": failed, "mode": "template"})
        state.notes.append(gateway)
        tool, call, fallback = observation.get("tool"), observation.get("call"), observation.get("fallback")
        if isinstance(tool, str):
            call_args = dict(call) if isinstance(call, Mapping) else {}
            evidence = observation.get("result")
            note: dict[str, Any] = {
                "node": tool,
                "call": call_args,
                "fallback": fallback if isinstance(fallback, str) else None,
            }
            if isinstance(evidence, Mapping) and evidence.get("truncated"):
                note["truncated"] = evidence.get("truncation") or True  # a bound cut the tool's result
            state.notes.append(note)
            summary = summarize(intent.target, observation)
            state.turn.send(ToolUsed(tool=tool, call=call_args, summary=summary, ok=not fallback, evidence=evidence))
        state.observation = observation
        return state


def summarize(route: str, observation: Mapping[str, Any]) -> str:
    """The ``tool`` event's short evidence summary, e.g. ``2 rows`` or ``1 document (top score 0.71)``."""
    fallback = observation.get("fallback")
    result = observation.get("result")
    if fallback:
        return f"no data ({fallback})"
    if route == "POSTGRES" and isinstance(result, Mapping):
        n = result.get("row_count", 0)
        return f"{n} row{'s' if n != 1 else ''}" + (" (truncated)" if result.get("truncated") else "")
    if route == "VECTOR" and isinstance(result, Mapping):
        docs = result.get("documents") or []
        return f"{len(docs)} document{'s' if len(docs) != 1 else ''} (top score {docs[0]['score']:.2f})"
    if route == "EXTERNAL":
        return "mock result"
    return ""
