"""The desk's runtime: how a run of the desk's plan is one turn, on the engine's public seam
(:class:`routegate.plan.Runtime`), the way the routing agent's runtime makes its runs.

:class:`DeskRuntime` makes the turn's :class:`~routegate.apps.support.contracts.TurnResult` from the turn's state
(:class:`~.payloads.TurnState`: what the steps recorded) and how the run ended (the plan's
:class:`~routegate.plan.PlanResult`: its stop, if any, and the plan's trace). A run that stopped before the Respond
node answered (a refused decision, a tool's stop, the deadline) is still answered, safely, here: the turn's
``route`` event (when the router step did not send it), the apology's ``token`` events, and its trace note. Its runs
send no step events (the turn's stream carries its own: ``route``, ``tool``, ``token``); its steps return their
stops; its plan's spans are the engine's (``routegate.plan`` with a ``routegate.step`` per step), below the turn's
``routegate.turn`` root that the desk opens around the run.
"""

from __future__ import annotations

import logging

from routegate.apps.support.contracts import (
    ENCODER_UNAVAILABLE,
    LLM_UNAVAILABLE,
    UNANSWERED_FALLBACKS,
    AnswerToken,
    TurnResult,
    unanswered,
)
from routegate.apps.support.payloads import Note, TurnState
from routegate.apps.support.respond import tokens_of
from routegate.core import RunContext
from routegate.core.stop_reasons import Phase
from routegate.plan import PlanResult, Runtime

logger = logging.getLogger(__name__)


class DeskRuntime(Runtime[TurnState, TurnResult]):
    """The desk plan's runtime (one per plan): its runs start from a :class:`~.payloads.TurnState` (``deps``: the
    turn's :class:`~.turn.TurnInput`) and end with the turn's :class:`TurnResult`."""

    owner = "SupportAgent"
    logger = logger
    step_events = False
    returns_stops = True

    def result(self, state: TurnState, ended: PlanResult[object], ctx: RunContext[object]) -> TurnResult:
        """The turn's result: the router's choice, the tool's observation and the answer the steps recorded, the
        trace notes in the order the steps ran after the router's and the plan's; a stopped run answered safely."""
        turn = state.turn
        choice = state.choice
        route = choice.route if choice is not None else "LLM"
        notes: list[Note] = [] if choice is None else [{"node": "router", **choice.to_dict()}]
        notes += [{"node": "plan", **entry.to_dict()} for entry in ended.trace]
        notes += turn.notes()
        notes += state.notes
        phase: Phase | None = None
        why = ""
        fallback = state.fallback
        answer = state.answer
        if ended.error is None and answer is not None:
            stop_reason, text = ended.stop_reason, answer
            if fallback is not None and fallback.split(":", 1)[0] in UNANSWERED_FALLBACKS:
                # the answer only says the question could not be answered: that is not a success
                stop_reason, phase = unanswered(fallback), "delegate"
                why = f"the {route} tool gave no answer ({fallback})"
            if choice is not None and choice.embedding_failed and fallback is None:
                fallback = ENCODER_UNAVAILABLE
            # the first model failure the turn answered around: the router's LLM stage, text-to-SQL, Respond
            llm_stop = choice.llm_stop if choice is not None else None
            if llm_stop is None:
                llm_stop = state.tool_llm_stop
            if llm_stop is None:
                llm_stop = state.llm_stop
            if llm_stop is not None:
                # the model failed and the offline path answered: the answer is the one given with no model
                notes.append({"node": "desk", "answered": "offline", "llm_failed": llm_stop})
                fallback = LLM_UNAVAILABLE
        else:
            # the run stopped before the Respond node answered (a refused decision, the deadline): answer safely
            stop_reason, why, phase = ended.stop_reason, ended.message, ended.phase
            state.announce()  # the route event, when the router step did not get to send it
            text = f"Sorry, I couldn't finish answering that ({stop_reason}). Please try again."
            if fallback is None:
                fallback = f"stopped:{stop_reason}"
            for token in tokens_of(text):
                turn.send(AnswerToken(token))
            notes.append({"node": "respond", "mode": "composer", "stopped": stop_reason, "why": why})
        return TurnResult(
            turn.session_id,
            route,
            text,
            stop_reason,
            fallback,
            tuple(notes),
            ended.elapsed_ms,
            phase=phase,
            message=why,
            run_id=ended.run_id,
            trace=ended.trace,
        )

    def log(self, result: TurnResult, ended: PlanResult[object]) -> None:
        """The turn's one log line: its run, route and how it ended (never the message)."""
        self.logger.info(
            "turn %s route=%s stop_reason=%s latency_ms=%.2f",
            result.run_id,
            result.route,
            result.stop_reason,
            result.elapsed_ms,
        )
