"""What one user turn reads, fixed before the desk's plan runs: the session, the message (read against the
conversation, :mod:`.followup`), the memory, where the turn's events go and whose turn it is (the tenant its
database connections are taken for, :mod:`.tenancy`).

:class:`TurnInput` is read-only. It is the ``deps`` of the plan's run (``ctx.run.deps``): the steps read it there,
and so does a tool worker that declares a :class:`~routegate.core.RunContext` parameter (the Postgres node gives
the text-to-SQL prompt the conversation and what a follow-up carried, :func:`turn_from`). What a step produces
goes forward in its payload, never into the turn (:mod:`.graph`); what the turn established (:meth:`TurnInput.context`)
is read from the tool's observation when the turn is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from routegate.apps.support.contracts import Message, RouteChosen, SupportEvent, SupportRoute
from routegate.apps.support.followup import FollowUp, resolve
from routegate.apps.support.router import RouteChoice
from routegate.apps.support.supplied import SuppliedHistory
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.apps.support.turn_context import TurnContext, context_of, contexts_of, next_turn
from routegate.core import RunContext

logger = logging.getLogger(__name__)


class TurnInput(NamedTuple):
    """One turn's read-only input (see the module docstring). Build it with :func:`read_turn`. A named tuple:
    immutable, and built on every turn at a fifth of a frozen dataclass's cost."""

    session_id: str
    # what the plan routes and the tools get: the user's message or, read against the conversation, the question a
    # follow-up stands for; the user's own words are :attr:`said`
    message: str
    history: tuple[Message, ...] = ()
    followup: FollowUp | None = None  # the message read against the history (``None``: not read against it)
    emit: Callable[[SupportEvent], None] | None = None  # where the turn's events go (``None``: nobody listens)
    tenant: str = ANONYMOUS  # whose turn it is: the fair queue of the desk's database serves tenants in turn
    # the conversation came from the caller, not from memory: what of it the turn reads (:mod:`.supplied`)
    supplied: SuppliedHistory | None = None

    @property
    def said(self) -> str:
        """The user's own words (what memory keeps), whatever the turn read them as."""
        return self.followup.message if self.followup is not None else self.message

    def user_messages(self) -> list[str]:
        """The user's earlier messages in the session, oldest first."""
        return [m.content for m in self.history if m.role == "user"]

    def send(self, event: SupportEvent) -> None:
        """The turn's one event path: hand ``event`` to the listener, if any."""
        emit = self.emit
        if emit is not None:
            emit(event)

    def announce(self, choice: RouteChoice | None) -> None:
        """Send the ``route`` event of ``choice`` (the LLM route, layer ``unknown``, when the router chose none)."""
        if choice is None:
            self.send(RouteChosen(route="LLM", layer="unknown"))
            return
        why = choice.why
        followup = self.followup
        if followup is not None and followup.resolved:  # the route panel says what was carried
            why = f"{why}; follow-up: {followup.carried}"
        self.send(RouteChosen(route=choice.route, layer=choice.layer, scores=dict(choice.scores), why=why))

    def notes(self) -> tuple[dict[str, Any], ...]:
        """The turn's own trace notes: what of a supplied conversation it read, what a follow-up carried."""
        followup = self.followup
        notes = (self.supplied.note(),) if self.supplied is not None else ()
        return (*notes, followup.note()) if followup is not None and followup.resolved else notes

    def context(self, route: SupportRoute, observation: Mapping[str, Any] | None) -> TurnContext:
        """What this turn established (from its route and its tool's ``observation``), stored with its answer for
        the next turns' follow-ups."""
        followup = self.followup
        number = followup.turn if followup is not None else next_turn(self.history, contexts_of(self.history))
        return context_of(number, route, observation, self.message)


def read_turn(
    message: str,
    *,
    session_id: str,
    history: tuple[Message, ...] = (),
    emit: Callable[[SupportEvent], None] | None = None,
    tenant: str = ANONYMOUS,
    supplied: SuppliedHistory | None = None,
) -> TurnInput:
    """The turn of ``message`` for ``tenant``: its follow-up references resolved against ``history`` (a follow-up
    is routed, and its tool called, as the question it stands for). ``supplied``: the conversation the caller sent,
    read instead of ``history`` (its user messages only, :mod:`.supplied`). A fault of the resolver leaves the
    message as it is (logged)."""
    if supplied is not None:
        history = supplied.messages
    try:
        followup = resolve(message, history)
    except Exception:
        logger.warning("resolving a follow-up failed; the message is routed as it is", exc_info=True)
        followup = FollowUp(message, message, next_turn(history, []))
    return TurnInput(
        session_id, followup.text if followup.resolved else message, history, followup, emit, tenant, supplied
    )


def turn_from(ctx: RunContext[Any] | None) -> TurnInput | None:
    """The turn a step's or a worker's run context belongs to (``None`` outside a desk turn)."""
    deps = ctx.deps if ctx is not None else None
    return deps if isinstance(deps, TurnInput) else None
