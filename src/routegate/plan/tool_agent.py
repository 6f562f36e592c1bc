"""The tool agent: a chat model calls tools until it answers, and every call goes through the policy boundary — a
runtime on the Plan engine's public seam (:class:`~routegate.plan.Runtime`).

::

    model ──► tools ──► model ──► ... ──► answer      (no tool call in a turn: its text is the answer;
      ▲                                     │           an answer the output check refused goes back to the
      └─────────────────────────────────────┘           model under on_refusal="observe")

* ``model`` — the model is asked (:class:`~routegate.llm.StructuredChatModel.respond`, the tools offered with
  ``tool_choice="auto"``) with the conversation so far: one turn. ``max_route_attempts`` bounds the turns.
* ``tools`` — every call of the turn is one governed step (:class:`~routegate.core.governed.GovernedStep`): all
  of them are validated first — the policy (allowlist, argument bounds, the tool's schema, its flow rules:
  provenance), then the gateway's own refusals (execution allowlist, registry, signature) —, then the accepted
  ones run in order through the gateway under the run's ledger (``max_delegations`` counts tool calls, the loop
  guard refuses a call repeated with the same arguments). Each call's result goes back to the model as a ``tool``
  message.
* ``answer`` — a turn without a tool call is the model's answer; the output check sees it before it leaves.

A refusal — ``invalid_route:*`` (a tool the model may not call, bad arguments), ``route_denied:provenance*:*`` (a
flow rule), ``route_denied:<t>`` / ``route_missing:<t>`` / ``route_bad_args:<t>`` (the gateway), the output
check's ``output_denied:*`` — ends the run under ``on_refusal="end"`` (nothing of that turn runs), and under
``"observe"`` goes back to the model as the call's result (``{"status": "refused", "stop_reason", "message"}``;
a refused answer as a user message) so that it can go on without it; when the turns run out, the run ends with
the last refusal's stop reason. Budgets, the loop guard, a tool's fault (``route_error:<t>``), the model's
failures (``llm_*``) and the deadline end the run in both modes. Nothing raises for what the model says.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pydantic_core
from opentelemetry.trace import Span, Tracer

from routegate.core import stop_reasons as sr
from routegate.core.context import RunContext, RunDepsT
from routegate.core.contracts import Budget, RouteIntent, RouteSpec, TraceEntry, jsonable
from routegate.core.gateway import RouteGateway
from routegate.core.governed import (
    GovernedStep,
    OnRefusal,
    Stopped,
    output_refusal,
    refusal_observation,
    refusals_exhausted,
)
from routegate.core.messages import goal_refusal
from routegate.core.outcome import Outcome
from routegate.core.policy import RoutePolicy
from routegate.core.protocols import RouteDecision
from routegate.core.provenance import OutputCheck, needs_sources
from routegate.core.telemetry import Attr
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.llm.protocol import ChatMessage, ToolCallData
from routegate.llm.route_tools import RouteTools, route_intents, route_tools
from routegate.llm.structured import ModelReply, StructuredChatModel, ToolCall, ToolsFormat
from routegate.plan.envelope import Envelope
from routegate.plan.goal_doors import GoalDoors
from routegate.plan.plan import Plan
from routegate.plan.result import PlanResult
from routegate.plan.runtime import RunSpans, Runtime, TracedSpans
from routegate.plan.step import Step
from routegate.plan.tool_result import ModelTurnEvent, ToolAgentResult, ToolCallEvent
from routegate.plan.when import Predicate

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "You are an assistant that does what the user asks with the tools you are given. Call a tool whenever you need "
    "one, several at once if they do not depend on each other; when you are done, answer the user in plain text. "
    'A tool result {"status": "refused", ...} means the call was refused by policy and did not run: do not repeat '
    "it; go on without it, or tell the user what you could not do."
)
"""The system message of a run when ``instructions`` is not given."""

_SUCCESS = Outcome.success()


class _Run:
    """One run's own facts, the plan's payload from step to step: the conversation, the turn, the model's last
    reply, the trace, the calls, the refusals handed back, and the answer."""

    __slots__ = (
        "again",
        "answer",
        "calls",
        "context",
        "goal",
        "listen",
        "messages",
        "refused",
        "reply",
        "task",
        "trace",
        "turn",
    )

    reply: ModelReply  # set by the model step
    again: bool  # set by the answer step: the output check sent the answer back to the model

    def __init__(self, goal: object, context: Mapping[str, Any], task: str | None) -> None:
        self.goal: Any = goal  # checked by the first turn (the result reports "" for a non-text)
        self.context = context
        self.task = task
        self.turn = 0
        self.messages: list[ChatMessage] = []
        self.trace: list[TraceEntry] = []
        self.calls: list[ToolCallEvent] = []
        self.refused: list[Outcome] = []
        self.answer: str | None = None
        self.listen: Callable[[Any], None] | None = None

    def send(self, event: ModelTurnEvent | ToolCallEvent) -> None:
        if isinstance(event, ToolCallEvent):
            self.calls.append(event)
        if self.listen is not None:
            self.listen(event)


def _answers(env: Envelope) -> bool:
    """The route from the model step to the answer step: the model's turn holds no tool call."""
    return env.error is None and not env.payload.reply.tool_calls


def _back(env: Envelope) -> bool:
    """The route back to the model step: after the tools ran, or when the output check sent the answer back."""
    return env.error is None and (env.payload.answer is None)


# the routes as the plan's diagram names them
_ANSWERS = Predicate(_answers, "no tool call")
_BACK = Predicate(_back, "no answer yet")


class _ToolRuntime(Runtime[_Run, ToolAgentResult, ModelTurnEvent | ToolCallEvent]):
    """The tool agent's runtime: its runs end with a :class:`ToolAgentResult`, open a ``routegate.tool_agent`` root
    span (the kernel's policy and delegate spans below it, a ``routegate.route`` span per model turn), log one line
    and stream one event per turn and per call (no step events; the governed steps send none of their own). Its
    steps return their stops."""

    owner = "ToolAgent"
    logger = logger
    step_events = False
    returns_stops = True

    def __init__(self, budget: Budget) -> None:
        self._budget = budget

    def context(self, state: _Run, deps: Any, emit: Callable[[Any], None] | None) -> RunContext[Any]:
        """A context under the agent's budget whose listener is the run's own: the stream carries the agent's
        events, one per turn and per call, not the governed steps' three per call."""
        state.listen = emit
        return RunContext.start(deps, self._budget)

    def result(self, state: _Run, ended: PlanResult[Any], ctx: RunContext[Any]) -> ToolAgentResult:
        error = ended.error
        goal = state.goal if isinstance(state.goal, str) else ""
        outcome = _SUCCESS if error is None else ended.outcome
        return ToolAgentResult(
            outcome,
            state.answer if error is None else None,
            tuple(state.trace),
            ended.run_id,
            ended.elapsed_ms,
            goal,
            state.turn,
            tuple(state.calls),
            tuple(state.messages),
        )

    def spans(self, tracer: Tracer, state: _Run, ctx: RunContext[Any]) -> RunSpans:
        def record(result: ToolAgentResult) -> dict[str, Any]:
            return {Attr.ATTEMPTS: result.turns, Attr.DELEGATIONS: ctx.ledger.delegations}

        attributes = {Attr.RUNTIME: "tool_agent", Attr.RUN_ID: ctx.run_id}
        return TracedSpans(tracer, "routegate.tool_agent", attributes, record=record, steps=False)

    def log(self, result: ToolAgentResult, ended: PlanResult[Any]) -> None:
        logger.info(
            "tool agent run %s turns=%d calls=%d stop_reason=%s latency_ms=%.2f",
            result.run_id,
            result.turns,
            len(result.calls),
            result.stop_reason,
            result.elapsed_ms,
        )


def tool_content(value: object) -> str:
    """What a tool returned, as the text of its ``tool`` message: a text as it is, anything else as JSON
    (a pydantic model, a dataclass, dates and decimals included; an object JSON cannot hold as its ``repr``)."""
    if isinstance(value, str):
        return value
    try:
        return pydantic_core.to_json(value, fallback=repr).decode()
    except (ValueError, TypeError, RecursionError):  # a cycle, a value too deep: what jsonable keeps of it
        return json.dumps(jsonable(value), ensure_ascii=False)


def _record_turn(turn: Span, reply: object) -> None:
    if turn.is_recording() and isinstance(reply, ModelReply):
        turn.set_attribute("routegate.tool_calls", len(reply.tool_calls))


class ToolAgent(GoalDoors[_Run, ToolAgentResult, ModelTurnEvent | ToolCallEvent, RunDepsT]):
    """A chat model that calls tools until it answers, every call governed (see the module docstring).

    ``model`` is a :class:`~routegate.llm.StructuredChatModel` (``OpenAIChatModel`` against any OpenAI-compatible
    endpoint with tool calls; :class:`~routegate.testing.ScriptedChatModel` in tests); ``tools`` are
    :class:`~routegate.core.Worker` objects (``@worker``), each offered to the model as a function tool whose
    parameters are its argument schema — the one the policy checks. Flow rules on a tool's arguments
    (``Annotated[..., From(...)]``, ``LinksFrom``, ``NotFrom``, or ``Worker(flows=...)``) are checked against the
    run's sources: the goal is ``user``, ``context`` is ``config`` (and is shown to the model in the system
    message), every tool's result is ``tool:<name>#<n>``.

    ``budget.max_route_attempts`` bounds the model's turns, ``budget.max_delegations`` the tool calls,
    ``budget.max_seconds`` the whole run. ``policy_allow`` are the tools the model is offered and may call
    (default: all), ``execution_allow`` the gateway's allowlist, applied again when a call runs (default: all).
    ``on_refusal`` and ``output_check`` work as the routing agent's. ``instructions`` is the system message
    (default :data:`INSTRUCTIONS`).

    A run is one run of :attr:`plan` (steps ``model``, ``tools``, ``answer``) and returns a
    :class:`~routegate.plan.ToolAgentResult`; :meth:`iter` streams a :class:`~routegate.plan.ModelTurnEvent` per
    turn and a :class:`~routegate.plan.ToolCallEvent` per call, then the final event. As a step of a plan
    (``Step(agent)``) its run is part of the plan's run (:meth:`run_step`), the step's ``task=`` the system message's
    instructions.
    """

    def __init__(
        self,
        *,
        model: StructuredChatModel,
        tools: Sequence[Worker],
        instructions: str = INSTRUCTIONS,
        budget: Budget | None = None,
        policy_allow: Iterable[str] | None = None,
        execution_allow: Iterable[str] | None = None,
        on_refusal: OnRefusal = "end",
        output_check: OutputCheck | None = None,
        temperature: float = 0.0,
        name: str = "tool-agent",
    ) -> None:
        if on_refusal not in ("end", "observe"):
            raise ConfigurationError(f"on_refusal must be 'end' or 'observe', got {on_refusal!r}")
        if output_check is not None and not callable(output_check):
            raise ConfigurationError(f"output_check must be callable, got {type(output_check).__name__}")
        if not callable(getattr(model, "respond", None)):
            raise ConfigurationError(
                f"model must answer tool calls (a StructuredChatModel with respond()), got {type(model).__name__}"
            )
        if not isinstance(instructions, str) or not instructions.strip():
            raise ConfigurationError("instructions must be a non-blank text (the run's system message)")
        names = [tool.name for tool in tools]
        allowed = frozenset(names if policy_allow is None else policy_allow)
        offered = [tool for tool in tools if tool.name in allowed]
        if not offered:
            raise ConfigurationError(f"a ToolAgent needs at least one tool the model may call, got {sorted(allowed)}")
        self.name = name
        self.model = model
        self.instructions = instructions
        self.temperature = temperature
        self.budget = budget or Budget()
        self.gateway = RouteGateway(allow=names if execution_allow is None else execution_allow, registry=tools)
        self.policy = RoutePolicy(allowed, {tool.name: tool.schema for tool in tools})
        self.step = GovernedStep(self.policy, self.gateway, check=_any_value)
        self.on_refusal: OnRefusal = on_refusal
        self.output_check = output_check
        self._observe = on_refusal == "observe"
        self._tracks = (
            self.step.tracks_provenance or output_check is not None or needs_sources(*(tool.fn for tool in tools))
        )
        catalog = [RouteSpec(t.name, t.description, t.schema.model_json_schema()) for t in offered]
        self.tools: RouteTools = route_tools(catalog)
        self._format = ToolsFormat(self.tools.format.tools, choice="auto")
        self._runtime = _ToolRuntime(self.budget)
        # every turn is at most model → tools or model → answer, and one more model step ends a run that used them up
        steps = max(self.budget.max_iterations, 2 * self.budget.max_route_attempts + 1)
        self.plan: Plan[Any, Any] = Plan(
            Step(self._model, name="model", phase="route", routes={"answer": _ANSWERS}),
            Step(self._tools, name="tools", phase="delegate", routes={"model": _BACK}),
            Step(self._answer, name="answer", phase="finalize", routes={"model": _BACK}),
            budget=dataclasses.replace(self.budget, max_iterations=steps),
            name=name,
            runtime=self._runtime,
        )
        """The agent's run as a :class:`~routegate.plan.Plan`: steps ``model``, ``tools``, ``answer``."""

    # -- its doors (arun, run, iter, run_step: GoalDoors) --------------------------------------------------------
    def _state(self, goal: object, context: Mapping[str, Any], task: str | None) -> _Run:
        return _Run(goal, context, task)

    # -- the plan's steps ------------------------------------------------------------------------------------------
    async def _model(self, state: _Run, ctx: RunContext[Any]) -> _Run | RunStopError:
        """The ``model`` step: one turn of the model over the conversation so far."""
        turn = state.turn + 1
        if turn == 1:
            goal = state.goal
            refused = goal_refusal(goal)
            if refused is not None:
                return refused
            if self._tracks:
                self.step.admit(ctx, goal, state.context, always=True)
            state.messages = [
                {"role": "system", "content": self._system(state)},
                {"role": "user", "content": goal},
            ]
        elif turn > self.budget.max_route_attempts:
            return self._used_up(state)
        state.turn = turn
        asked = self.model.respond(state.messages, output=self._format, temperature=self.temperature)
        reply: object = await ctx.spans.route(turn, asked, _record_turn)
        if not isinstance(reply, ModelReply):
            raise TypeError(f"the model's respond() must return a ModelReply, got {type(reply).__name__}")
        state.reply = reply
        state.send(ModelTurnEvent(turn, reply.text, reply.tool_calls))
        return state

    async def _tools(self, state: _Run, ctx: RunContext[Any]) -> _Run | RunStopError:
        """The ``tools`` step: every call of the turn validated, then the accepted ones run in order; each call's
        result (or its refusal, handed back) becomes a ``tool`` message."""
        turn, step = state.turn, self.step
        calls = [
            call if call.id else ToolCall(call.name, call.arguments, f"call_{turn}_{n}")
            for n, call in enumerate(state.reply.tool_calls, 1)
        ]
        made: list[ToolCallData] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        state.messages.append({"role": "assistant", "content": state.reply.text, "tool_calls": made})
        results: list[str] = [""] * len(calls)
        accepted: list[tuple[int, RouteIntent, RouteDecision, float]] = []
        for index, (call, raw) in enumerate(zip(calls, route_intents(calls, self.tools), strict=True)):
            started = time.perf_counter()
            decision = RouteDecision(raw, decided_by="model", why=f"tool call {call.name!r} ({call.id})")
            verdict = step.validate(decision, ctx, turn, None, started)
            if isinstance(verdict, RouteIntent):
                verdict = self._gateway_refusal(verdict, decision, ctx, turn, started)
                if isinstance(verdict, RouteIntent):
                    accepted.append((index, verdict, decision, started))
                    continue
            state.trace.append(verdict.trace)
            outcome = verdict.outcome
            target = (
                verdict.intent.target if verdict.intent is not None else self.tools.targets.get(call.name, call.name)
            )
            evidence = verdict.trace.provenance
            state.send(
                ToolCallEvent(
                    turn, call.id, target, raw.get("args"), False, None, outcome.stop_reason, self._observe, evidence
                )
            )
            if not self._observe:
                step.discard([intent for _, intent, _, _ in accepted], ctx)
                return outcome.as_error()
            state.refused.append(outcome)
            results[index] = json.dumps(refusal_observation(outcome), ensure_ascii=False)
        for index, intent, decision, started in accepted:
            done = await step.delegate(intent, ctx, turn, decision, started)
            state.trace.append(done.trace)
            call = calls[index]
            evidence = done.trace.provenance
            if isinstance(done, Stopped):  # a budget, the loop guard, the tool's fault: the run ends
                stopped = done.outcome.stop_reason
                state.send(
                    ToolCallEvent(turn, call.id, intent.target, intent.args, False, None, stopped, False, evidence)
                )
                return done.outcome.as_error()
            state.send(ToolCallEvent(turn, call.id, intent.target, intent.args, True, done.value, provenance=evidence))
            results[index] = tool_content(done.value)
        for call, content in zip(calls, results, strict=True):
            state.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        return state

    async def _answer(self, state: _Run, ctx: RunContext[Any]) -> _Run | RunStopError:
        """The ``answer`` step: a turn without a tool call is the answer, once the output check lets it go."""
        reply = state.reply
        text = (reply.text or reply.refusal or "").strip()
        if not text:
            message = f"the model answered turn {state.turn} with neither a tool call nor text"
            return RunStopError(sr.LLM_EMPTY, message, phase="finalize")
        if self.output_check is not None:
            refused = output_refusal(self.output_check, text, ctx, state.turn, None, logger)
            if refused is not None:
                state.trace.append(refused.trace)
                if not self._observe:
                    return refused.outcome.as_error()
                state.refused.append(refused.outcome)
                refusal = json.dumps(refusal_observation(refused.outcome), ensure_ascii=False)
                state.messages.append({"role": "assistant", "content": text})
                state.messages.append({"role": "user", "content": refusal})
                return state  # the answer stays None: back to the model
        state.messages.append({"role": "assistant", "content": text})
        state.answer = text
        return state

    # -- helpers ---------------------------------------------------------------------------------------------------
    def _system(self, state: _Run) -> str:
        """The system message: the instructions (a plan step's task, when the agent is a step), and the caller's
        context as JSON when there is one."""
        system = state.task or self.instructions
        if state.context:
            system += "\n\nContext:\n" + json.dumps(jsonable(state.context), ensure_ascii=False)
        return system

    def _gateway_refusal(
        self, intent: RouteIntent, decision: RouteDecision, ctx: RunContext[Any], turn: int, started: float
    ) -> RouteIntent | Stopped:
        """The gateway's own refusals (execution allowlist, registry, signature), asked for every call before any
        runs (the gateway asks them again when the call runs); the intent when there is none. A refused call's
        evidence, kept by the policy for its delegation, goes on its trace entry."""
        refused = self.gateway.refusal(intent)
        if refused is None:
            return intent
        ledger = ctx.provenance
        kept = ledger.pending.pop(id(intent), None) if ledger is not None else None
        entry = TraceEntry(
            turn,
            intent.target,
            False,
            "delegate",
            round((time.perf_counter() - started) * 1000.0, 3),
            stop_reason=refused.stop_reason,
            decided_by=decision.decided_by or None,
            why=decision.why or None,
            provenance=None if kept is None else kept[1].evidence,
        )
        return Stopped(Outcome(False, refused.stop_reason, "delegate", refused.message), entry, intent)

    def _used_up(self, state: _Run) -> RunStopError:
        """The stop of a run whose turns are used up: the last refusal's, or ``max_route_attempts``."""
        limit = self.budget.max_route_attempts
        if state.refused:
            return refusals_exhausted(state.refused, limit).as_error()
        message = f"max_route_attempts={limit} model turns used up without a final answer"
        return RunStopError(sr.MAX_ROUTE_ATTEMPTS, message, phase="route")


def _any_value(value: object) -> tuple[str, str] | None:
    """A tool may return anything: what it returned goes back to the model."""
    return None


__all__ = ["INSTRUCTIONS", "ToolAgent", "tool_content"]
