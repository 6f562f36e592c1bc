"""The LLM Response node: the one place every route ends, tool results and fallbacks alike.

* Offline (:func:`compose`): turns rows, documents or the mock result into a readable answer
  and invents nothing — every fact is a field of the evidence; the LLM route is answered from a description of
  what the desk can do (with a clarifying question, :data:`UNSURE_ANSWER`, when the router's "I don't know" gate
  chose it); a fallback says what was looked for and why nothing came back.
* With a chat model: the model answers from the same evidence and the last 10 messages (streamed), told to use
  nothing else. If it fails before its first token, the composer answers, the trace says why and the turn is
  marked as answered offline (``fallback: llm_unavailable``). The evidence is
  at most ``max_evidence_chars`` characters of JSON (:data:`MAX_EVIDENCE_CHARS`): rows that do not fit are left
  out and the result says it was cut, whatever the tool returned.

A result cut by the SQL tool's bounds (rows, bytes, long values) says so in the answer, either way.

Either way the answer is streamed as ``token`` events (after the router's ``route`` and the tool step's ``tool``
event) and the node returns the whole text as the plan's payload: the turn's answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

from routegate.apps.support.contracts import AnswerToken
from routegate.apps.support.payloads import Answer, Note, Observed, Routed, StepStop
from routegate.apps.support.turn import TurnInput, turn_from
from routegate.core import stop_reasons
from routegate.core._faults import fault_message
from routegate.errors import ConfigurationError, RunStopError
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.plan import StepContext

logger = logging.getLogger(__name__)

CAPABILITIES: Final = (
    "I'm the support desk assistant. I can look up customers and tickets (for example "
    "“What is the status of ticket 1?” or “Show tickets for customer John”), answer questions from our help "
    "articles (password reset, ticket escalation, refunds), and give the weather or the Bitcoin price from a "
    "mock service. Every question goes to exactly one of these sources; when none fits, I answer directly."
)
RESPOND_SYSTEM_PROMPT: Final = """You are a customer-support assistant. Answer the user's last message in a few
sentences, using ONLY the evidence given (database rows, help articles or a mock API result) and the conversation.
If the evidence is empty or a tool failed, say plainly that you could not find the information and what the user
can try; never invent records, prices, policies or numbers. If the route is LLM (no tool), answer conversational
questions briefly and describe what you can do: look up customers and tickets, answer from help articles
(password reset, ticket escalation, refunds), and give weather or Bitcoin prices from a mock service.
If the result says it was truncated, say that what you list is not the whole result."""
MAX_EVIDENCE_CHARS: Final = 96_000
"""The most characters of evidence (tool output as JSON) the answer prompt receives."""

_GREETING = re.compile(r"^\s*(hi|hello|hey|helo|good (morning|afternoon|evening))\b", re.IGNORECASE)
_THANKS = re.compile(r"\b(thanks?|thank you|thnks|cheers)\b", re.IGNORECASE)
_BYE = re.compile(r"\b(bye|goodbye|see you)\b", re.IGNORECASE)
_COUNT = re.compile(r"\b(how many|count|number of)\b", re.IGNORECASE)
_TOKEN = re.compile(r"\s*\S+")


def tokens_of(text: str) -> list[str]:
    """Split an answer into stream tokens (words with their leading whitespace); they join back exactly."""
    parts = _TOKEN.findall(text)
    tail = text[len("".join(parts)) :]
    if tail:
        parts.append(tail)
    return parts


def _looked_for(call: Mapping[str, Any] | None) -> str:
    params = dict((call or {}).get("params") or {})
    template = (call or {}).get("template")
    if template == "ticket_by_id":
        return f"ticket {params.get('id')}"
    if template == "customer_by_id":
        return f"customer {params.get('id')}"
    if str(template).startswith("tickets_by_customer_id") or "customer_id" in params:  # a model's SQL too
        status = f"{params['status']} " if params.get("status") else ""
        other = f" other than ticket {params['except_id']}" if "except_id" in params else ""
        return f"{status}tickets of customer {params.get('customer_id')}{other}"
    if "name" in params:
        return f"a customer matching “{str(params['name']).strip('%')}”"
    if "city" in params:
        return f"customers in {params['city']}"
    if "status" in params:
        return f"{params['status']} tickets"
    return "a matching record"


def _ticket_line(row: Mapping[str, Any]) -> str:
    who = f" ({row['customer']})" if row.get("customer") else ""
    return f"Ticket {row.get('id')}{who}: {row.get('issue')} — {row.get('status')}"


def _compose_rows(message: str, call: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> str:
    counting = bool(_COUNT.search(message))
    if rows and all("issue" in r and "status" in r for r in rows):
        if len(rows) == 1 and not counting:
            row = rows[0]
            who = f" for {row['customer']}" if row.get("customer") else ""
            return f"Ticket {row.get('id')}{who} is about “{row.get('issue')}” and its status is {row.get('status')}."
        head = f"There are {len(rows)} tickets" if counting else f"I found {len(rows)} tickets"
        return head + ":\n" + "\n".join(f"- {_ticket_line(r)}" for r in rows)
    if rows and all("name" in r and "city" in r for r in rows):
        if len(rows) == 1 and not counting:
            row = rows[0]
            ident = f" (customer {row['id']})" if "id" in row else ""
            return f"{row['name']}{ident} is from {row['city']}."
        head = f"There are {len(rows)} customers" if counting else f"I found {len(rows)} customers"
        lines = [f"- {r['name']}" + (f" (customer {r['id']})" if "id" in r else "") + f", {r['city']}" for r in rows]
        return head + ":\n" + "\n".join(lines)
    lines = ["- " + ", ".join(f"{k}: {v}" for k, v in r.items()) for r in rows]
    return f"I found {len(rows)} row{'s' if len(rows) != 1 else ''}:\n" + "\n".join(lines)


def model_failed_answer(reason: str) -> str | None:
    """The answer to a turn whose fallback ``reason`` says the language model failed before any tool ran
    (``llm_failed:<stop>``): it says so, and never blames the database or the documents; else ``None``."""
    if not reason.startswith("llm_failed:"):
        return None
    return (
        f"I couldn't answer that: the language model service failed ({reason.removeprefix('llm_failed:')}), "
        "so nothing was looked up. Please try again later."
    )


def _compose_fallback(route: str, reason: str, call: Mapping[str, Any] | None) -> str:
    if (failed := model_failed_answer(reason)) is not None:
        return failed
    if route == "POSTGRES":
        if reason == "empty":
            return (
                f"I couldn't find {_looked_for(call)} in our records. Please check the ticket or customer "
                "number (or the name) and try again."
            )
        return (
            "I couldn't look that up in the customer database just now. Please try again, or ask with a "
            "ticket number or a customer name."
        )
    if route == "VECTOR":
        if reason == "empty":
            return (
                "I couldn't find a help article about that. Our articles cover password reset, ticket escalation "
                "and refunds; for anything else, please contact support."
            )
        return "I couldn't search the help articles just now. Please try again in a moment."
    if route == "EXTERNAL":
        return (
            "I don't have that information: my external data source only knows today's weather and the Bitcoin price."
        )
    return CAPABILITIES


UNSURE_ANSWER: Final = (
    "I'm not sure what you're asking, so I haven't looked anything up. " + CAPABILITIES + " Could you ask again "
    "in English, in your own words (for example with a ticket number or a customer name)?"
)


def _compose_llm_route(message: str) -> str:
    if _THANKS.search(message):
        return "You're welcome! Is there anything else I can help you with?"
    if _BYE.search(message):
        return "Goodbye! Come back any time you need help."
    if _GREETING.search(message):
        return "Hello! " + CAPABILITIES + " What can I do for you?"
    return CAPABILITIES + " What would you like to know?"


def truncation_note(result: Mapping[str, Any]) -> str:
    """A line saying the result is not whole, when a bound of the SQL tool cut it; else empty."""
    if not result.get("truncated"):
        return ""
    return f"\n(This is not the whole result: {result.get('truncation') or 'it was cut'}.)"


def compose(message: str, route: str, observation: Mapping[str, Any]) -> str:
    """The offline grounded answer for one turn."""
    fallback = observation.get("fallback")
    call = observation.get("call")
    result = observation.get("result")
    if isinstance(fallback, str) and fallback:
        return _compose_fallback(route, fallback, call if isinstance(call, Mapping) else None)
    if route == "POSTGRES" and isinstance(result, Mapping):
        rows = result.get("rows") or []
        return _compose_rows(message, call if isinstance(call, Mapping) else None, rows) + truncation_note(result)
    if route == "VECTOR" and isinstance(result, Mapping):
        documents = result.get("documents") or []
        top = documents[0]
        answer = f"From our help article “{top['title']}”: {top['content']}"
        related = [d["title"] for d in documents[1:]]
        if related:
            answer += " (Related: " + ", ".join(f"“{t}”" for t in related) + ".)"
        return answer
    if route == "EXTERNAL" and isinstance(result, Mapping):
        return str(result.get("result"))
    return _compose_llm_route(message)


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
    max_evidence_chars: int = MAX_EVIDENCE_CHARS,
    system_prompt: str = RESPOND_SYSTEM_PROMPT,
) -> list[ChatMessage]:
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
    """The Respond (LLM Response) node, the plan's ``LLM`` step: streams ``token`` events, returns the
    :class:`~.payloads.Answer`.

    Its input is the tool step's :class:`~.payloads.Observed`, or the router's :class:`~.payloads.Routed` on the
    direct LLM route (no evidence). A stop signal (:class:`~routegate.errors.RunStopError`) ends the turn with its
    stop reason; any other exception with ``finalize_error:<Exception>``; a blank answer with ``llm_empty``.

    ``system_prompt`` and ``composer`` (the offline answer: ``composer(routed, route, observation)``, from the
    router's :class:`~.payloads.Routed` — its ``message`` and ``choice`` — the route and the tool's observation) are
    the desk's wording; the defaults are the support desk's (:data:`RESPOND_SYSTEM_PROMPT`, :func:`compose`). A
    configured desk passes its own (``routegate.apps.configured``).
    """

    def __init__(
        self,
        *,
        chat_model: ChatModel | None = None,
        max_evidence_chars: int = MAX_EVIDENCE_CHARS,
        system_prompt: str = RESPOND_SYSTEM_PROMPT,
        composer: Callable[[Routed, str, Mapping[str, Any]], str] | None = None,
    ) -> None:
        if max_evidence_chars < 1000:
            raise ConfigurationError(f"max_evidence_chars must be >= 1000, got {max_evidence_chars}")
        self.chat_model = chat_model
        self.max_evidence_chars = max_evidence_chars
        self.system_prompt = system_prompt
        self.composer = composer or support_answer

    async def run_step(self, payload: object, ctx: StepContext) -> Answer:
        turn = turn_from(ctx.run)
        if turn is None:
            raise ConfigurationError(f"the Respond node runs with deps=TurnInput (step {ctx.step!r})")
        if isinstance(payload, Observed):
            routed, observation = payload.routed, payload.observation
        elif isinstance(payload, Routed):
            routed, observation = payload, {}
        else:
            raise ConfigurationError(f"the Respond node takes Routed or Observed, got {type(payload).__name__}")
        written = _Written()
        parts: list[str] = []
        emit = turn.emit
        try:
            if self.chat_model is not None:
                async for token in self._from_model(self.chat_model, turn, routed.route, observation, written):
                    parts.append(token)
                    if emit is not None:
                        emit(AnswerToken(token))
            else:
                written.notes.append({"node": "respond", "mode": "composer"})
            if not parts:  # no model, or it failed before its first token: the composer answers
                # a plain loop, not an async generator: the offline answer's ~30 tokens are a tenth of a turn's CPU
                for token in tokens_of(self.composer(routed, routed.route, observation)):
                    parts.append(token)
                    if emit is not None:
                        emit(AnswerToken(token))
        except RunStopError as stop:
            raise StepStop(stop.stop_reason, stop.message, phase=stop.phase, notes=written.notes) from stop
        except Exception as exc:
            message = fault_message(exc, "the Respond node", logger)
            stop_reason = stop_reasons.finalize_error(exc)
            raise StepStop(stop_reason, message, phase="finalize", notes=written.notes) from exc
        text = "".join(parts).strip()
        if not text:
            message = "the Respond node returned an empty answer"
            raise StepStop(stop_reasons.LLM_EMPTY, message, phase="finalize", notes=written.notes)
        return Answer(text, tuple(written.notes), written.llm_stop)

    async def _from_model(
        self, model: ChatModel, turn: TurnInput, route: str, observation: Mapping[str, Any], written: _Written
    ) -> AsyncIterator[str]:
        """The model's answer as it streams; nothing when it fails before its first token or answers blank (the
        trace notes why, and the composer answers). A failure after its first token ends the turn."""
        started = False
        try:
            messages = llm_messages(
                turn, route, observation, max_evidence_chars=self.max_evidence_chars, system_prompt=self.system_prompt
            )
            async for delta in model.stream(messages):
                if delta:
                    started = True
                    yield delta
        except RunStopError as stop:
            if started:
                raise
            written.llm_stop = stop.stop_reason
            written.notes.append({"node": "respond", "llm_failed": stop.stop_reason, "mode": "composer"})
        else:
            if started:
                written.notes.append({"node": "respond", "mode": "llm"})
            else:
                written.notes.append({"node": "respond", "llm_failed": "llm_empty", "mode": "composer"})


class _Written:
    """How one answer is being written (the Respond step's own, while it runs): its trace notes and the model
    failure it answered around."""

    __slots__ = ("llm_stop", "notes")

    def __init__(self) -> None:
        self.notes: list[Note] = []
        self.llm_stop: str | None = None


def support_answer(routed: Routed, route: str, observation: Mapping[str, Any]) -> str:
    """The support desk's offline answer: the clarifying question when the router's "I don't know" gate chose the
    LLM route, else :func:`compose`."""
    unsure = routed.choice.layer == "unsure"
    return UNSURE_ANSWER if unsure and route == "LLM" else compose(routed.message, route, observation)
