"""The support desk's graph, declared as a :class:`routegate.plan.Plan` (:func:`support_plan`)::

    router ──routes_by="route"──┬─► POSTGRES ─┐
                                ├─► VECTOR   ─┤
                                ├─► EXTERNAL ─┼─► LLM   (Respond: the direct LLM route and every fallback)
                                └─────────────┘

The plan's input is the turn (:class:`~.turn.Turn`); every step reads it as ``ctx.plan_input``. Governance is
the core's, composed here, not re-implemented:

* ``router`` (:class:`RouterStep`) — the router's choice becomes a route decision that the core
  :class:`~routegate.core.governed.GovernedStep` validates (policy allowlist, argument schema); a refusal ends the turn with
  the core's ``invalid_route:*`` stop reason. The step's output, a :class:`~.router.RouteChoice`, routes the plan by
  its ``Literal`` field ``route``; ``after_branches="LLM"`` makes the branches exclusive, rejoining at Respond.
* ``POSTGRES`` / ``VECTOR`` / ``EXTERNAL`` (:class:`ToolStep`) — delegate the validated route through the same
  governed step (the core gateway under the turn's run context and :class:`~routegate.core.contracts.DelegationLedger`:
  execution allowlist, ``max_delegations``, loop guard, argument check, the "done" observation contract). A refusal, a worker that raises or an observation
  out of contract ends the turn with the gateway's stop reason; a tool error or an empty result is an ordinary
  observation with a ``fallback``, and the plan goes on to Respond (no retry, no second tool).
* ``LLM`` — the Respond node (:class:`~.respond.RespondNode`).

A step ends the turn by raising :class:`~routegate.errors.RunStopError`: the plan reports its stop reason and the
desk answers safely (:mod:`.desk`). Each node adds its own trace note to the turn (the governed step's core
:class:`~routegate.core.TraceEntry`, the tool call); the plan adds one entry per executed step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from routegate.apps.support.contracts import ToolUsed
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import RouteChoice, SupportRouter
from routegate.apps.support.turn import Turn, turn_of
from routegate.core import RunContext, stop_reasons
from routegate.core._faults import fault_message
from routegate.core.governed import GovernedStep, Stopped
from routegate.errors import RunStopError, RuntimeFaultError
from routegate.plan import Plan, Step, StepContext

logger = logging.getLogger(__name__)


def support_plan(*, router: RouterStep, tool: ToolStep, respond: RespondNode) -> Plan:
    """Router → one of POSTGRES / VECTOR / EXTERNAL → LLM; the LLM route goes straight to LLM (run once)."""
    return Plan(
        Step(router, name="router", output=RouteChoice, routes_by="route", after_branches="LLM"),
        Step(tool, name="POSTGRES"),
        Step(tool, name="VECTOR"),
        Step(tool, name="EXTERNAL"),
        Step(respond, name="LLM"),
        max_iterations=3,  # router, one tool, Respond
        name="support-desk",
    )


class RouterStep:
    """The Router node: the router's choice, validated by the core governed step; emits the ``route`` event."""

    def __init__(self, router: SupportRouter, step: GovernedStep) -> None:
        self.router = router
        self.step = step

    async def run_step(self, payload: object, ctx: StepContext) -> RouteChoice:
        turn = turn_of(ctx)
        try:
            choice = await self.router.route_choice(turn.message, turn.user_messages())
        except RunStopError:
            raise
        except Exception as exc:
            message = fault_message(exc, "the router", logger)
            raise RunStopError(stop_reasons.router_error(exc), message, phase="route") from exc
        turn.choice = choice
        if choice.llm_stop is not None:
            turn.model_failed(choice.llm_stop)
        decision = choice.decision(turn.message)
        turn.decision = decision
        verdict = self.step.validate(decision, _run_of(turn))
        if isinstance(verdict, Stopped):
            raise RunStopError(verdict.stop_reason, verdict.outcome.message, phase="route")
        turn.intent = verdict
        turn.announce()
        return choice


class ToolStep:
    """A tool node's step: delegates the turn's validated route once through the core governed step; emits
    ``tool``. The worker gets the turn's run context (its ``deps`` is the turn) when it declares one."""

    def __init__(self, step: GovernedStep) -> None:
        self.step = step

    async def run_step(self, payload: object, ctx: StepContext) -> Mapping[str, Any]:
        turn = turn_of(ctx)
        intent = turn.intent
        if intent is None:  # pragma: no cover - the router step sets it before the plan routes here
            raise RuntimeFaultError(f"step {ctx.step!r} ran without a validated route")
        run = _run_of(turn)
        done = await self.step.delegate(intent, run, attempt=run.ledger.delegations + 1, decision=turn.decision)
        turn.notes.append({"node": "gateway", **done.trace.to_dict()})
        if isinstance(done, Stopped):
            raise RunStopError(done.stop_reason, done.outcome.message, phase=done.outcome.phase or "delegate")
        observation = done.observation
        assert observation is not None  # the "done" status check accepts mappings only
        tool, call, fallback = observation.get("tool"), observation.get("call"), observation.get("fallback")
        turn.fallback = fallback if isinstance(fallback, str) else None
        if isinstance(tool, str):
            call_args = dict(call) if isinstance(call, Mapping) else {}
            evidence = observation.get("result")
            note: dict[str, Any] = {"node": tool, "call": call_args, "fallback": turn.fallback}
            if isinstance(evidence, Mapping) and evidence.get("truncated"):
                note["truncated"] = evidence.get("truncation") or True  # a bound cut the tool's result
            turn.notes.append(note)
            summary = summarize(intent.target, observation)
            turn.send(ToolUsed(tool=tool, call=call_args, summary=summary, ok=not fallback, evidence=evidence))
        return observation


def _run_of(turn: Turn) -> RunContext[Any]:
    if turn.run is None:  # a turn built by hand (tests): give it a context of its own
        turn.run = RunContext(turn, ledger=turn.ledger)
    return turn.run


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
