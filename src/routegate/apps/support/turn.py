"""One user turn's state, shared by the graph's nodes: the message, the memory, the message read against the
conversation (:mod:`.followup`), the router's choice and the validated route, the delegation ledger, the fallback
reason, the tool's observation, the nodes' trace notes, and the event sink. What the turn established
(:meth:`Turn.context`) is stored with its answer for the next turns.

The turn is the input of the desk's :class:`~routegate.plan.Plan`: every step reads it as ``ctx.plan_input``
(:func:`turn_of`). Its :class:`~routegate.core.RunContext` (``turn.run``, whose ``deps`` is the turn) goes with the
delegation through the core gateway: a tool worker that needs the conversation declares a ``RunContext``
parameter (the Postgres node gives the text-to-SQL prompt what a follow-up carried) — no hidden channel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from routegate.apps.support.contracts import Message, RouteChosen, SupportEvent, SupportRoute
from routegate.apps.support.followup import FollowUp, resolve
from routegate.apps.support.router import RouteChoice
from routegate.apps.support.rules import RuleVerdict
from routegate.apps.support.turn_context import TurnContext, context_of, contexts_of, next_turn
from routegate.core import RouteDecision, RunContext
from routegate.core.contracts import DelegationLedger, RouteIntent
from routegate.errors import ConfigurationError
from routegate.plan import StepContext

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Turn:
    session_id: str
    # what the graph routes and the tools get: the user's message or, once read against the conversation, the
    # question a follow-up stands for (:meth:`read_against_history`); the user's own words are :attr:`said`
    message: str
    history: tuple[Message, ...]
    ledger: DelegationLedger
    emit: Callable[[SupportEvent], None] | None = None
    choice: RouteChoice | None = None
    intent: RouteIntent | None = None  # the router's decision once the policy boundary accepted it
    fallback: str | None = None
    notes: list[dict[str, Any]] = field(default_factory=list)  # the nodes' trace entries, in order
    emitted_route: bool = False
    rules_verdict: RuleVerdict | None = None  # the rules' verdict on the message, when the desk has it already
    decision: RouteDecision | None = None  # the router's choice as a route decision (what the policy judged)
    run: RunContext[Any] | None = None  # the turn's run context: its deps is this turn
    llm_stop: str | None = None  # the first model failure the turn answered around offline (its stop reason)
    followup: FollowUp | None = None  # the message read against the conversation (:meth:`read_against_history`)
    observation: Mapping[str, Any] | None = None  # the tool's observation (the evidence) the answer was built on

    @property
    def route(self) -> SupportRoute:
        """The route of this turn: the router's choice (the LLM route before the router has chosen)."""
        return self.choice.route if self.choice is not None else "LLM"

    def send(self, event: SupportEvent) -> None:
        if self.emit is not None:
            self.emit(event)

    def announce(self) -> None:
        """Send the ``route`` event, once per turn."""
        if self.emitted_route:
            return
        self.emitted_route = True
        choice = self.choice
        if choice is None:
            self.send(RouteChosen(route="LLM", layer="unknown"))
        else:
            why = choice.why
            if self.followup is not None and self.followup.resolved:  # the route panel says what was carried
                why = f"{why}; follow-up: {self.followup.carried}"
            self.send(RouteChosen(route=choice.route, layer=choice.layer, scores=dict(choice.scores), why=why))

    def model_failed(self, stop_reason: str) -> None:
        """Record that the chat model failed and the turn went on offline (the first failure is kept)."""
        if self.llm_stop is None:
            self.llm_stop = stop_reason

    def user_messages(self) -> list[str]:
        return [m.content for m in self.history if m.role == "user"]

    @property
    def said(self) -> str:
        """The user's own words (what memory keeps), whatever the turn read them as."""
        return self.followup.message if self.followup is not None else self.message

    def read_against_history(self) -> FollowUp:
        """Resolve the message's follow-up references against the history (once): a follow-up's :attr:`message`
        becomes the question it stands for, and the trace notes what was carried (:mod:`.followup`). A fault of
        the resolver leaves the message as it is (logged)."""
        if self.followup is not None:
            return self.followup
        try:
            followup = resolve(self.message, self.history)
        except Exception:
            logger.warning("resolving a follow-up failed; the message is routed as it is", exc_info=True)
            followup = FollowUp(self.message, self.message, next_turn(self.history, []))
        self.followup = followup
        if followup.resolved:
            self.message = followup.text
            self.notes.append(followup.note())
        return followup

    def context(self) -> TurnContext:
        """What this turn established, stored with its answer for the next turns' follow-ups."""
        number = self.followup.turn if self.followup is not None else next_turn(self.history, contexts_of(self.history))
        return context_of(number, self.route, self.observation)


def turn_of(ctx: StepContext) -> Turn:
    """The turn a step of the desk's plan belongs to (the plan's input)."""
    turn = ctx.plan_input
    if not isinstance(turn, Turn):
        raise ConfigurationError(f"the support plan runs on a Turn, got {type(turn).__name__} (step {ctx.step!r})")
    return turn


def turn_from(ctx: RunContext[Any] | None) -> Turn | None:
    """The turn a worker's run context belongs to (``None`` outside a desk turn)."""
    deps = ctx.deps if ctx is not None else None
    return deps if isinstance(deps, Turn) else None
