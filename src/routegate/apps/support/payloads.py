"""The state of one turn's run of the desk's plan (:mod:`.graph`): the payload every step is handed and hands on,
and what each step records in it — the router's choice and the route the policy accepted, the tool's observation,
the answer, the trace notes in the order the steps ran. The desk's runtime (:mod:`.runtime`) makes the turn's
result from it and from how the run ended, as the routing agent's runtime does from its own state.

It is the run's own: made for the run, handed from step to step, never shared with another run. What the turn
read before the run (the session, the message, the memory, the tenant) is the run's ``deps``, the read-only
:class:`~routegate.apps.support.turn.TurnInput`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from routegate.apps.support.router import RouteChoice
from routegate.apps.support.turn import TurnInput
from routegate.core import RouteDecision
from routegate.core.contracts import HistoryEntry, RouteIntent
from routegate.core.outcome import Outcome

Note: TypeAlias = Mapping[str, Any]
"""One entry of the turn's trace as the wire shows it (``{"node": "gateway", ...}``)."""

NextStep = Literal["POSTGRES", "VECTOR", "EXTERNAL", "LLM", "refused"]
"""Where the router step sends the run: the route the policy accepted, or ``refused`` (a refusal handed back to the
router, ``on_refusal="observe"``)."""


@dataclass(eq=False, slots=True)
class TurnState:
    """What one turn's steps record while its run goes (see the module docstring).

    * ``route`` — set by the router step: the step the plan routes to (the plan routes by this field), the route the
      policy accepted or ``refused``;
    * ``choice``, ``intent``, ``decision`` — the router's choice, the route the policy accepted and the decision it
      judged; ``attempt`` the router's attempts so far, ``refused`` / ``outcomes`` the refusals handed back;
    * ``observation`` — the tool's (``None`` on the LLM route, or when no tool ran);
    * ``answer`` and ``llm_stop`` — the Respond step's answer and the chat model's failure it answered around;
    * ``notes`` — the steps' trace notes, in the order they ran;
    * ``announced`` — whether the turn's ``route`` event was sent (it is sent once: :meth:`announce`)."""

    turn: TurnInput
    route: NextStep | None = None
    choice: RouteChoice | None = None
    intent: RouteIntent | None = None
    decision: RouteDecision | None = None
    attempt: int = 0
    refused: list[HistoryEntry] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    observation: Mapping[str, Any] | None = None
    answer: str | None = None
    llm_stop: str | None = None
    notes: list[Note] = field(default_factory=list)
    announced: bool = False

    def announce(self) -> None:
        """Send the turn's ``route`` event, once: the route the router chose (the LLM route, layer ``unknown``,
        when it chose none)."""
        if not self.announced:
            self.announced = True
            self.turn.announce(self.choice)

    @property
    def fallback(self) -> str | None:
        """Why the tool gave no answer (``empty``, ``tool_error:<code>``, ...), ``None`` when it did or none ran."""
        return _text(self.observation.get("fallback")) if self.observation is not None else None

    @property
    def tool_llm_stop(self) -> str | None:
        """The stop reason of the text-to-SQL model's failure the tool answered around offline, if any."""
        return _text(self.observation.get("llm_failed")) if self.observation is not None else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
