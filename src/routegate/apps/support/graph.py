"""The support desk's graph, declared as a :class:`routegate.plan.Plan` (:func:`support_plan`)::

    router ──routes_by="route"──┬─► POSTGRES ─┐
                                ├─► VECTOR   ─┤
                                ├─► EXTERNAL ─┼─► LLM   (Respond: the direct LLM route and every fallback)
                                └─────────────┘

The plan's run is the turn: its budget is the desk's (``max_seconds`` is the engine's deadline, and a deadline
stop reports the phase of the step it cut off: ``route``, ``delegate`` or ``finalize``), its input the message,
its ``deps`` the turn's read-only :class:`~.turn.TurnInput` (``ctx.run.deps``). What a step produces goes forward
in its payload; governance is the core's, composed here, not re-implemented:

* ``router`` (:class:`RouterStep`) — the router's choice becomes a route decision that the core
  :class:`~routegate.core.governed.GovernedStep` validates (policy allowlist, argument schema); a refusal ends the
  turn with the core's ``invalid_route:*`` stop reason. Its output, :class:`~.payloads.Routed` (the choice with the validated
  intent), routes the plan by its ``Literal`` field ``route``; ``after_branches="LLM"`` makes the branches
  exclusive, rejoining at Respond.
* ``POSTGRES`` / ``VECTOR`` / ``EXTERNAL`` (:class:`ToolStep`) — delegate the validated route through the same
  governed step (the core gateway under the run's context and its :class:`~routegate.core.contracts.DelegationLedger`:
  execution allowlist, ``max_delegations``, loop guard, argument check, the "done" observation contract). A
  refusal, a worker that raises or an observation out of contract ends the turn with the gateway's stop reason; a
  tool error or an empty result is an ordinary observation with a ``fallback``, and the plan goes on to Respond
  (no retry, no second tool). Its output is :class:`~.payloads.Observed` (the tool's observation).
* ``LLM`` — the Respond node (:class:`~.respond.RespondNode`); its output is the :class:`~.payloads.Answer`.

A step ends the turn by raising :class:`~routegate.errors.RunStopError` — :class:`~.payloads.StepStop` when it has trace notes
or a route choice to hand on: the plan reports its stop reason and the desk answers safely (:mod:`.desk`). Every
payload (and every ``StepStop``) carries its step's trace notes (:func:`notes_of`): the desk's trace is read from
the plan's envelopes, in the order the steps ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from routegate.apps.support.contracts import ToolUsed
from routegate.apps.support.payloads import Answer, Note, Observed, Routed, StepStop
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import RouteChoice, SupportRouter
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
from routegate.core.outcome import Outcome
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import Envelope, ErrorInfo, Plan, Step, StepContext

SUPPORT_BUDGET: Final = Budget(max_route_attempts=1, max_delegations=1, max_seconds=60.0)
"""One route decision (the plan routes once), one delegation, 60 s per turn."""
STEPS_PER_TURN: Final = 3
"""The most steps a turn runs: the router, one tool, Respond."""


def support_plan(
    *, router: RouterStep, tool: ToolStep, respond: RespondNode, budget: Budget = SUPPORT_BUDGET
) -> Plan[TurnInput, Answer]:
    """Router → one of POSTGRES / VECTOR / EXTERNAL → LLM; the LLM route goes straight to LLM (run once). A run
    is one turn under ``budget`` (its ``max_seconds``; at most three steps)."""
    return Plan(
        Step(router, name="router", output=Routed, routes_by="route", after_branches="LLM", phase="route"),
        Step(tool, name="POSTGRES", phase="delegate"),
        Step(tool, name="VECTOR", phase="delegate"),
        Step(tool, name="EXTERNAL", phase="delegate"),
        Step(respond, name="LLM", phase="finalize"),
        budget=Budget(
            budget.max_route_attempts, budget.max_delegations, budget.max_seconds, max_iterations=STEPS_PER_TURN
        ),
        name="support-desk",
    )


def turn_of(ctx: StepContext) -> tuple[TurnInput, RunContext[Any]]:
    """The turn a step of the desk's plan belongs to (the run's ``deps``), and the run's context."""
    run = ctx.run
    turn = run.deps if run is not None else None
    if run is None or not isinstance(turn, TurnInput):
        got = "no run context" if run is None else type(turn).__name__
        raise ConfigurationError(
            f"the support plan runs with deps=TurnInput (routegate.apps.support.turn.read_turn), got {got} "
            f"(step {ctx.step!r})"
        )
    return turn, run


def notes_of(env: Envelope) -> tuple[Note, ...]:
    """The trace notes of one step of the desk's plan: from its payload, or from the stop it raised."""
    source = env.payload if env.error is None else env.error.exception
    notes = getattr(source, "notes", ())
    return notes if isinstance(notes, tuple) else ()


class RouterStep:
    """The Router node: the router's choice, validated by the core governed step; emits the ``route`` event.

    The turn's sources are labelled first, through the governed step (:meth:`GovernedStep.admit`: the message and
    the user's earlier messages ``user``, the desk's earlier answers ``tool:memory#<n>``), when a tool declares
    flow rules. A refused decision is one trace note (``{"node": "policy", ...}``, with the arguments' origins
    when a flow rule refused it). With ``on_refusal="end"`` it ends the turn; with ``"observe"`` it is handed
    back to the router (its route is not offered again, the refusal is in the request's history for the LLM
    stage) while ``max_route_attempts`` lasts, and the turn ends with the last refusal's stop reason after.
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

    async def run_step(self, payload: object, ctx: StepContext) -> Routed:
        turn, run = turn_of(ctx)
        message = turn.message
        if self.step.tracks_provenance:
            self.step.admit(run, message, conversation=[(m.role, m.content) for m in turn.history])
        refused: list[HistoryEntry] = []
        outcomes: list[Outcome] = []
        notes: list[Note] = []
        choice: RouteChoice | None = None
        for attempt in range(1, self.max_route_attempts + 1):
            try:
                choice = await self.router.route_choice(message, turn.user_messages(), refused)
            except RunStopError as stop:
                raise StepStop(stop.stop_reason, stop.message, phase=stop.phase, notes=notes, choice=choice) from stop
            except Exception as exc:  # the engine's one fault path words it (router_error:<Exc>, class only)
                fault = ErrorInfo.from_exception(exc, ctx.step, "route")
                raise StepStop(fault.stop_reason, fault.message, phase="route", notes=notes, choice=choice) from exc
            decision = choice.decision(message)
            verdict = self.step.validate(decision, run, attempt=attempt)
            if not isinstance(verdict, Stopped):
                turn.announce(choice)
                return Routed(choice.route, choice, verdict, decision, message, tuple(notes))
            outcome = verdict.outcome
            notes.append({"node": "policy", **verdict.trace.to_dict()})
            if not self.observe:
                phase = outcome.phase or "route"
                raise StepStop(verdict.stop_reason, outcome.message, phase=phase, notes=notes, choice=choice)
            outcomes.append(outcome)
            intent = verdict.intent or refused_route(decision.raw)
            refused.append(HistoryEntry(attempt, intent, refusal_observation(outcome)))
        ended = refusals_exhausted(outcomes, self.max_route_attempts)
        raise StepStop(ended.stop_reason, ended.message, phase=ended.phase or "route", notes=notes, choice=choice)


class ToolStep:
    """A tool node's step: delegates the validated route (its input, the router's :class:`~.payloads.Routed`) once through
    the core governed step; emits ``tool``. The worker gets the run's context (its ``deps`` is the turn) when it
    declares one."""

    def __init__(self, step: GovernedStep) -> None:
        self.step = step

    async def run_step(self, payload: object, ctx: StepContext) -> Observed:
        turn, run = turn_of(ctx)
        if not isinstance(payload, Routed):
            raise ConfigurationError(f"step {ctx.step!r} takes the router's Routed, got {type(payload).__name__}")
        intent = payload.intent
        done = await self.step.delegate(intent, run, attempt=run.ledger.delegations + 1, decision=payload.decision)
        gateway: Note = {"node": "gateway", **done.trace.to_dict()}
        if isinstance(done, Stopped):
            phase = done.outcome.phase or "delegate"
            raise StepStop(done.stop_reason, done.outcome.message, phase=phase, notes=(gateway,))
        observation = done.observation
        assert observation is not None  # the "done" status check accepts mappings only
        notes: list[Note] = []
        failed = observation.get("llm_failed")
        if isinstance(failed, str):  # the text-to-SQL model failed: the offline path wrote the query
            notes.append({"node": "text_to_sql", "llm_failed": failed, "mode": "template"})
        notes.append(gateway)
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
            notes.append(note)
            summary = summarize(intent.target, observation)
            turn.send(ToolUsed(tool=tool, call=call_args, summary=summary, ok=not fallback, evidence=evidence))
        return Observed(payload, observation, tuple(notes))


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
