"""The LLM Response node: the one place every route ends, tool results and fallbacks alike.

* Offline: the desk's composer (:class:`~.answers.DeskAnswers`, worded by its configuration) turns rows, documents
  or the tool's result into a readable answer and invents nothing — every fact is a field of the evidence; the LLM
  route is answered from a description of what the desk can do (with a clarifying question when the router's "I
  don't know" gate chose it); a fallback says what was looked for and why nothing came back.
* With a chat model: the model answers from the same evidence and the last 10 messages (streamed), told to use
  nothing else. If it fails before its first token, the composer answers, the trace says why and the turn is
  marked as answered offline (``fallback: llm_unavailable``). The evidence is
  at most ``max_evidence_chars`` characters of JSON (:data:`MAX_EVIDENCE_CHARS`): rows that do not fit are left
  out and the result says it was cut, whatever the tool returned.

A result cut by the SQL tool's bounds (rows, bytes, long values) says so in the answer, either way.

Either way the answer is streamed as ``token`` events (after the router's ``route`` and the tool step's ``tool``
event) and the node records the whole text in the turn's state: the turn's answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.contracts import AnswerToken
from routegate.apps.support.payloads import TurnState
from routegate.apps.support.turn import TurnInput
from routegate.core import stop_reasons
from routegate.errors import ConfigurationError, RunStopError
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.plan import ErrorInfo, StepContext

logger = logging.getLogger(__name__)

MAX_EVIDENCE_CHARS: Final = 96_000
"""The most characters of evidence (tool output as JSON) the answer prompt receives."""

_TOKEN = re.compile(r"\s*\S+")


def tokens_of(text: str) -> list[str]:
    """Split an answer into stream tokens (words with their leading whitespace); they join back exactly."""
    parts = _TOKEN.findall(text)
    tail = text[len("".join(parts)) :]
    if tail:
        parts.append(tail)
    return parts


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def evidence_json(evidence: Mapping[str, Any], max_chars: int = MAX_EVIDENCE_CHARS) -> str:
    """The evidence as JSON, at most ``max_chars`` characters: the result's rows that do not fit are left out (the
    result then says it was cut); anything still too long is cut as text."""
    text = _dumps(evidence)
    result = evidence.get("result")
    if len(text) > max_chars and isinstance(result, Mapping) and isinstance(result.get("rows"), list):
        rows: list[Any] = result["rows"]
        earlier = result.get("truncation")
        budget = max_chars - len(_dumps({**evidence, "result": {**result, "rows": []}})) - 200  # room for the note
        kept = 0
        for row in rows:
            budget -= len(_dumps(row)) + 2
            if budget < 0:
                break
            kept += 1
        note = f"only the first {kept} rows fit the answer's {max_chars}-character evidence bound"
        cut = {
            **result,
            "rows": rows[:kept],
            "row_count": kept,
            "truncated": True,
            "truncation": f"{earlier}; {note}" if earlier else note,
        }
        text = _dumps({**evidence, "result": cut})
    return text[:max_chars]


def llm_messages(
    turn: TurnInput,
    route: str,
    observation: Mapping[str, Any],
    *,
    system_prompt: str,
    max_evidence_chars: int = MAX_EVIDENCE_CHARS,
) -> list[ChatMessage]:
    """The answer prompt: the desk's ``system_prompt``, the conversation, and the user's words with the evidence."""
    evidence = {
        "route": route,
        "tool": observation.get("tool"),
        "call": observation.get("call"),
        "result": observation.get("result"),
        "fallback": observation.get("fallback"),
    }
    messages: list[ChatMessage] = [{"role": "system", "content": system_prompt}]
    messages += [{"role": m.role, "content": m.content} for m in turn.history]
    followup = turn.followup
    read_as = ""
    if followup is not None and followup.resolved:  # the same resolved question the router and the tool saw
        read_as = f"\n(Read against the conversation as: {followup.text} — {followup.carried}.)"
    messages.append(
        {
            "role": "user",
            "content": f"{turn.said}{read_as}\n\nEvidence (JSON):\n{evidence_json(evidence, max_evidence_chars)}",
        }
    )
    return messages


class RespondNode:
    """The Respond (LLM Response) node, the plan's ``LLM`` step: streams ``token`` events and records the turn's
    answer in its state (:class:`~.payloads.TurnState`).

    It answers from the state: the route the router chose and the tool's observation (none on the direct LLM route:
    no evidence). A stop signal (:class:`~routegate.errors.RunStopError`) ends the turn with its stop reason; any
    other exception with ``finalize_error:<Exception>`` (the engine's fault-to-stop conversion,
    :meth:`~routegate.plan.ErrorInfo.of`); a blank answer with ``llm_empty``.

    ``answers`` is the desk's wording (:class:`~.answers.DeskAnswers`, the built-in desk's when ``None``): the model's
    system prompt and the offline answer.
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        answers: DeskAnswers | None = None,
        max_evidence_chars: int = MAX_EVIDENCE_CHARS,
    ) -> None:
        if max_evidence_chars < 1000:
            raise ConfigurationError(f"max_evidence_chars must be >= 1000, got {max_evidence_chars}")
        self.chat_model = chat_model
        self.max_evidence_chars = max_evidence_chars
        self.answers = answers or DeskAnswers(builtin_config())
        self.system_prompt = self.answers.system_prompt()

    async def run_step(self, payload: object, ctx: StepContext) -> TurnState | RunStopError:
        state = payload
        if not isinstance(state, TurnState):
            raise ConfigurationError(f"the Respond node takes the turn's TurnState, got {type(payload).__name__}")
        turn, choice = state.turn, state.choice
        route = choice.route if choice is not None else "LLM"
        observation = state.observation or {}
        parts: list[str] = []
        emit = turn.emit
        try:
            if self.chat_model is not None:
                async for token in self._from_model(self.chat_model, state, route, observation):
                    parts.append(token)
                    if emit is not None:
                        emit(AnswerToken(token))
            else:
                state.notes.append({"node": "respond", "mode": "composer"})
            if not parts:  # no model, or it failed before its first token: the composer answers
                unsure = choice is not None and choice.layer == "unsure"
                # a plain loop, not an async generator: the offline answer's ~30 tokens are a tenth of a turn's CPU
                for token in tokens_of(self.answers.compose(turn.message, route, observation, unsure=unsure)):
                    parts.append(token)
                    if emit is not None:
                        emit(AnswerToken(token))
        except RunStopError as stop:
            return stop
        except Exception as exc:  # the engine's one conversion, worded for this node
            fault = ErrorInfo.of(exc, "the Respond node", stop_reasons.finalize_error(exc), "finalize", logger)
            return RunStopError(fault.stop_reason, fault.message, phase=fault.phase)
        text = "".join(parts).strip()
        if not text:
            return RunStopError(stop_reasons.LLM_EMPTY, "the Respond node returned an empty answer", phase="finalize")
        state.answer = text
        return state

    async def _from_model(
        self, model: ChatModel, state: TurnState, route: str, observation: Mapping[str, Any]
    ) -> AsyncIterator[str]:
        """The model's answer as it streams; nothing when it fails before its first token or answers blank (the
        trace notes why, and the composer answers). A failure after its first token ends the turn."""
        started = False
        try:
            messages = llm_messages(
                state.turn,
                route,
                observation,
                max_evidence_chars=self.max_evidence_chars,
                system_prompt=self.system_prompt,
            )
            async for delta in model.stream(messages):
                if delta:
                    started = True
                    yield delta
        except RunStopError as stop:
            if started:
                raise
            state.llm_stop = stop.stop_reason
            state.notes.append({"node": "respond", "llm_failed": stop.stop_reason, "mode": "composer"})
        else:
            if started:
                state.notes.append({"node": "respond", "mode": "llm"})
            else:
                state.notes.append({"node": "respond", "llm_failed": "llm_empty", "mode": "composer"})
