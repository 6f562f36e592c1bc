"""What the steps of the desk's plan hand forward (:mod:`.graph`): each step's payload, and the stop a step
raises, carry what the step produced — the route, the observation, the answer — and its trace notes. Nothing a
step produces goes anywhere else: the desk reads the turn's result from the plan's envelopes.

The payloads are immutable. :class:`Routed` is a frozen dataclass (the plan routes by its ``Literal`` field);
the others are named tuples, which cost a fifth of a frozen dataclass to build, on every turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from routegate.apps.support.contracts import SupportRoute
from routegate.apps.support.router import RouteChoice
from routegate.core import RouteDecision
from routegate.core.contracts import RouteIntent
from routegate.errors import RunStopError

Note: TypeAlias = Mapping[str, Any]
"""One entry of the turn's trace as the wire shows it (``{"node": "gateway", ...}``)."""


@dataclass(frozen=True, slots=True)
class Routed:
    """The router step's output: the router's ``choice`` as the policy accepted it (``intent``), the ``decision``
    the policy judged, the ``message`` routed, and the refusals handed back before it (``on_refusal="observe"``)
    as trace ``notes``."""

    route: SupportRoute
    choice: RouteChoice
    intent: RouteIntent
    decision: RouteDecision
    message: str
    notes: tuple[Note, ...] = ()


class Observed(NamedTuple):
    """A tool step's output: the tool's ``observation`` (the evidence Respond answers from), the route that led to
    it, and the step's trace ``notes`` (a text-to-SQL model failure, the gateway's entry, the tool call)."""

    routed: Routed
    observation: Mapping[str, Any]
    notes: tuple[Note, ...] = ()

    @property
    def fallback(self) -> str | None:
        """Why the tool gave no answer (``empty``, ``tool_error:<code>``, ...), ``None`` when it did."""
        return _text(self.observation.get("fallback"))

    @property
    def llm_stop(self) -> str | None:
        """The stop reason of the text-to-SQL model's failure the tool answered around offline, if any."""
        return _text(self.observation.get("llm_failed"))


class Answer(NamedTuple):
    """The Respond step's output: the answer's ``text``, how it was written (its trace ``notes``: ``composer`` or
    ``llm``) and the chat model's failure it answered around offline (``llm_stop``, its stop reason), if any."""

    text: str
    notes: tuple[Note, ...] = ()
    llm_stop: str | None = None


class StepStop(RunStopError):
    """A desk step's stop, with what the turn's answer still needs from the step: its trace ``notes`` and the
    router's ``choice`` (the route a refused decision named)."""

    def __init__(
        self,
        stop_reason: str,
        message: str = "",
        *,
        phase: str | None = None,
        notes: Sequence[Note] = (),
        choice: RouteChoice | None = None,
    ) -> None:
        super().__init__(stop_reason, message, phase=phase)
        self.notes: tuple[Note, ...] = tuple(notes)
        self.choice = choice


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
