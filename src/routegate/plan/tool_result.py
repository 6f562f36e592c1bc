"""What a :class:`~routegate.plan.ToolAgent` run reports: one event per model turn and per tool call as they happen,
and its result — a :class:`~routegate.core.RunResult` with the turns, the calls and the conversation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from routegate.core.contracts import TraceEntry, jsonable
from routegate.core.events import FinalEvent
from routegate.core.outcome import Outcome
from routegate.core.result import RunResult
from routegate.llm.protocol import ChatMessage
from routegate.llm.structured import ToolCall


@dataclass(frozen=True, slots=True)
class ModelTurnEvent:
    """The model answered turn ``turn``: its text (``""`` when none) and the tool calls it made (none: its answer)."""

    turn: int
    text: str
    calls: tuple[ToolCall, ...]
    type: str = "model_turn"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "turn": self.turn, "text": self.text, "calls": [c.to_dict() for c in self.calls]}


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """One tool call of turn ``turn`` was governed: the call's id, the tool it named (``target``, the route its
    tool name stands for) and its arguments as the model wrote them (untrusted); ``ok`` when the tool ran and its
    result went back to the model (``output``: what it returned); else ``stop_reason`` says why not, and
    ``handed_back`` whether the refusal went back to the model as the call's result (``on_refusal="observe"``)
    instead of ending the run. ``provenance`` is the evidence of the arguments' origins, when the tool has flow
    rules."""

    turn: int
    call_id: str
    target: str
    args: object
    ok: bool
    output: object = None
    stop_reason: str | None = None
    handed_back: bool = False
    provenance: Mapping[str, tuple[str, ...]] | None = None
    type: str = "tool_call"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "turn": self.turn,
            "call_id": self.call_id,
            "target": self.target,
            "args": jsonable(self.args),
            "ok": self.ok,
        }
        if self.ok:
            out["output"] = jsonable(self.output)
        else:
            out["stop_reason"] = self.stop_reason
            out["handed_back"] = self.handed_back
        if self.provenance is not None:
            out["provenance"] = jsonable(self.provenance)
        return out


class ToolAgentResult(RunResult[str | None]):
    """How a :class:`~routegate.plan.ToolAgent` run ended: a :class:`~routegate.core.RunResult` whose ``output`` is
    the model's final answer (``None`` when the run stopped), plus

    * ``goal`` — the request as the run saw it (``""`` when it was not a string);
    * ``turns`` — how many times the model was asked;
    * ``calls`` — every tool call the model made, governed, in order (:class:`ToolCallEvent`);
    * ``messages`` — the conversation as the model last saw it, the final answer last (the refused answers and the
      refusals handed back included).
    """

    __slots__ = ("calls", "goal", "messages", "turns")

    def __init__(
        self,
        outcome: Outcome,
        output: str | None,
        trace: tuple[TraceEntry, ...],
        run_id: str,
        elapsed_ms: float,
        goal: str,
        turns: int,
        calls: tuple[ToolCallEvent, ...],
        messages: tuple[ChatMessage, ...],
    ) -> None:
        super().__init__(outcome, output, trace, run_id, elapsed_ms)
        self.goal = goal
        self.turns = turns
        self.calls = calls
        self.messages = messages

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data: how it ended, the answer (``output``), the turns, the calls, the trace and the
        conversation."""
        out = RunResult.to_dict(self)
        out["goal"] = self.goal
        out["turns"] = self.turns
        out["calls"] = [call.to_dict() for call in self.calls]
        out["messages"] = [dict(message) for message in self.messages]
        return out

    def __repr__(self) -> str:
        return f"ToolAgentResult(stop_reason={self.stop_reason!r}, turns={self.turns}, output={self.output!r})"


ToolAgentEvent = ModelTurnEvent | ToolCallEvent | FinalEvent[ToolAgentResult]
"""What :meth:`routegate.plan.ToolAgent.iter` yields: a :class:`ModelTurnEvent` per turn, a :class:`ToolCallEvent`
per tool call, then the :class:`~routegate.core.FinalEvent`."""

__all__ = ["ModelTurnEvent", "ToolAgentEvent", "ToolAgentResult", "ToolCallEvent"]
