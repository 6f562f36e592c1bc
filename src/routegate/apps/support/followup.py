"""Follow-ups: what the last turns established, and the next message's references resolved against it.

Each answered turn leaves a small structured record next to its answer in memory (:class:`TurnContext`, the
``context`` column of ``support_messages``): the turn's number, its route, the shape of the question it answered
(:data:`Asked`), and the records its evidence named — tickets (with their customer), customers, articles, a city,
a ticket status. It is derived from the tool's evidence (the rows, the documents), never from the answer's wording,
so it holds whether the composer or a language model wrote the answer.

:func:`resolve` reads the next message against those records and, when the message leans on them, rewrites it into
a question that stands on its own; the router, the tool's argument and (with a model configured) the text-to-SQL
and routing prompts all see that question, and the trace says what was carried (``customer 1, from turn 2``):

* a pronoun or a definite reference — ``he``, ``she``, ``his``, ``their``, ``the customer``, ``that ticket``,
  ``it`` — becomes the record it points at (``customer 1``, ``ticket 3``, the article's title); a ticket's customer
  serves a question about a person ("which city is he from?" after "status of ticket 1");
* "his other tickets" becomes the customer's tickets other than the one in focus;
* an ordinal — "and the second one?" — picks from the list the last answer gave;
* an elliptic question — "what about customer 2?", "and in London?", "and tomorrow?", "and the closed ones?" — asks
  the previous question again about the new thing;
* a bare question with nothing to act on — "which city?", "what's the status?" — takes the record in focus.

Nothing is carried when the message names its own record, when the rules route it elsewhere (a help topic, the
weather, thanks), when the reference is ambiguous (a singular "he" after a list of three customers), or when it
looks pasted in or is not English. Deterministic and offline: regular expressions over the message, no model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from routegate.apps.support.contracts import Message, SupportRoute
from routegate.apps.support.rules import SupportRules, correct_typos
from routegate.apps.support.sql_templates import named_customers
from routegate.apps.support.unsure import is_not_english, pasted_shape

Asked = Literal[
    "ticket",
    "customer",
    "customer_tickets",
    "customers_in_city",
    "tickets_by_status",
    "customers",
    "weather",
    "crypto",
    "article",
]
"""The shape of the question a turn answered: what an elliptic follow-up ("what about customer 2?") asks again."""

MAX_REFS: Final = 20
"""The most tickets, customers or articles one turn's context keeps (an ordinal reaches the first twenty)."""

_TEMPLATE_ASKED: Final[Mapping[str, Asked]] = {
    "ticket_by_id": "ticket",
    "customer_by_id": "customer",
    "customers_by_name": "customer",
    "tickets_by_customer_id": "customer_tickets",
    "tickets_by_customer_id_and_status": "customer_tickets",
    "tickets_by_customer_id_except": "customer_tickets",
    "tickets_by_customer_name": "customer_tickets",
    "tickets_by_customer_name_and_status": "customer_tickets",
    "tickets_by_status": "tickets_by_status",
    "all_tickets": "tickets_by_status",
    "customers_by_city": "customers_in_city",
    "all_customers": "customers",
}


class TicketRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: int
    customer_id: int | None = None


class CustomerRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: int | None = None
    name: str | None = Field(default=None, max_length=200)
    city: str | None = Field(default=None, max_length=200)

    @property
    def label(self) -> str:
        """How a rewritten question names the customer: ``customer 2`` (or ``customer Jane Smith``)."""
        return f"customer {self.id}" if self.id is not None else f"customer {self.name}"


class TurnContext(BaseModel):
    """What one answered turn established. Stored as JSON next to the turn's answer; read back as untrusted data
    (a row that does not validate is ignored, never an error)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    turn: int = Field(ge=1)
    route: SupportRoute
    asked: Asked | None = None
    tickets: tuple[TicketRef, ...] = Field(default=(), max_length=MAX_REFS)
    customers: tuple[CustomerRef, ...] = Field(default=(), max_length=MAX_REFS)
    articles: tuple[str, ...] = Field(default=(), max_length=MAX_REFS)
    city: str | None = Field(default=None, max_length=200)
    status: Literal["open", "closed"] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True) | {"turn": self.turn, "route": self.route}

    @property
    def customer(self) -> CustomerRef | None:
        """The one customer the turn is about (a ticket's customer counts), or ``None`` (none, or several)."""
        found = {(c.id, c.name): c for c in self.customers}
        for ticket in self.tickets:
            if ticket.customer_id is not None and not any(c.id == ticket.customer_id for c in found.values()):
                found[(ticket.customer_id, None)] = CustomerRef(id=ticket.customer_id)
        return next(iter(found.values())) if len(found) == 1 else None

    @property
    def ticket(self) -> TicketRef | None:
        """The one ticket the turn is about, or ``None`` (none, or several)."""
        return self.tickets[0] if len(self.tickets) == 1 else None


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A message read against the conversation: ``text`` is what the router and the tool see (the message itself
    when nothing was carried), ``carried`` says what came from which turn, ``turn`` is this turn's number."""

    message: str
    text: str
    turn: int
    carried: str | None = None

    @property
    def resolved(self) -> bool:
        return self.carried is not None

    def note(self) -> dict[str, Any]:
        """The trace entry: ``{"node": "followup", "carried": "customer 1, from turn 2", "read_as": ...}``."""
        return {"node": "followup", "carried": self.carried, "read_as": self.text}


# -- what a turn established --------------------------------------------------------------------------------------
def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value[:200] if isinstance(value, str) and value.strip() else None


def _status(value: object) -> Literal["open", "closed"] | None:
    return value if value in ("open", "closed") else None  # type: ignore[return-value]  # narrowed by the check


def _customers_of(rows: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> list[CustomerRef]:
    found: dict[tuple[int | None, str | None], CustomerRef] = {}
    for row in rows:
        ref = CustomerRef(id=_int(row.get("id")), name=_str(row.get("name")), city=_str(row.get("city")))
        found.setdefault((ref.id, ref.name), ref)
    refs = list(found.values())
    if len(refs) == 1 and refs[0].id is None:  # a model's SQL may leave the id out: the question's own id says it
        given = _int(params.get("id")) or _int(params.get("customer_id"))
        if given is not None:
            refs = [refs[0].model_copy(update={"id": given})]
    return refs


def _tickets_of(rows: Sequence[Mapping[str, Any]]) -> tuple[list[TicketRef], list[CustomerRef]]:
    tickets: list[TicketRef] = []
    customers: dict[tuple[int | None, str | None], CustomerRef] = {}
    for row in rows:
        ticket_id = _int(row.get("id"))
        customer_id = _int(row.get("customer_id"))
        if ticket_id is not None:
            tickets.append(TicketRef(id=ticket_id, customer_id=customer_id))
        name = _str(row.get("customer"))
        if customer_id is not None or name is not None:
            customers.setdefault((customer_id, name), CustomerRef(id=customer_id, name=name))
    return tickets, list(customers.values())


def _asked_about(template: str, params: Mapping[str, Any]) -> tuple[list[TicketRef], list[CustomerRef]]:
    ticket_id = _int(params.get("id")) if template == "ticket_by_id" else None
    customer_id = _int(params.get("id")) if template == "customer_by_id" else _int(params.get("customer_id"))
    name = _str(params.get("name"))
    tickets = [TicketRef(id=ticket_id)] if ticket_id is not None else []
    if customer_id is not None or name is not None:
        return tickets, [CustomerRef(id=customer_id, name=name.strip("%") if name else None)]
    return tickets, []


def _asked_of(params: Mapping[str, Any], tickets: Sequence[TicketRef]) -> Asked:
    """The shape of a question a model wrote the SQL for, from its parameters and what came back."""
    keys = set(params)
    if tickets:
        if keys & {"customer_id", "name", "customer", "customer_name"}:
            return "customer_tickets"
        return "ticket" if len(tickets) == 1 and "status" not in keys else "tickets_by_status"
    if "city" in keys:
        return "customers_in_city"
    return "customer" if keys else "customers"


def _is_ticket_row(row: Mapping[str, Any]) -> bool:
    return "issue" in row or "status" in row or "customer_id" in row


def context_of(turn: int, route: SupportRoute, observation: Mapping[str, Any] | None) -> TurnContext:
    """What a turn established, from its tool's observation (``None`` on the LLM route)."""
    observation = observation or {}
    call = observation.get("call") if isinstance(observation.get("call"), Mapping) else {}
    result = observation.get("result") if isinstance(observation.get("result"), Mapping) else {}
    assert isinstance(call, Mapping) and isinstance(result, Mapping)
    if route == "POSTGRES":
        params = call.get("params") if isinstance(call.get("params"), Mapping) else {}
        assert isinstance(params, Mapping)
        rows = [r for r in result.get("rows") or () if isinstance(r, Mapping)]
        template = str(call.get("template") or "")
        tickets: list[TicketRef] = []
        customers: list[CustomerRef] = []
        if rows and all(_is_ticket_row(r) for r in rows):
            tickets, customers = _tickets_of(rows)
        elif rows:
            customers = _customers_of(rows, params)
        else:  # nothing found: the record asked about is still the one a follow-up means ("his tickets?")
            tickets, customers = _asked_about(template, params)
        asked = _TEMPLATE_ASKED.get(template) or (_asked_of(params, tickets) if rows else None)
        city = _str(params.get("city"))
        return TurnContext(
            turn=turn,
            route=route,
            asked=asked,
            tickets=tuple(tickets[:MAX_REFS]),
            customers=tuple(customers[:MAX_REFS]),
            city=city.strip("%") if city else None,
            status=_status(params.get("status")),
        )
    if route == "VECTOR":
        documents = [d for d in result.get("documents") or () if isinstance(d, Mapping)]
        titles = [t for t in (_str(d.get("title")) for d in documents) if t is not None]
        return TurnContext(turn=turn, route=route, asked="article" if titles else None, articles=tuple(titles[:MAX_REFS]))
    if route == "EXTERNAL":
        kind = call.get("type")
        asked: Asked | None = "weather" if kind == "weather" else "crypto" if kind == "crypto" else None
        place = _CITY.search(str(call.get("query") or ""))
        return TurnContext(turn=turn, route=route, asked=asked, city=place.group(1) if place else None)
    return TurnContext(turn=turn, route=route)


def contexts_of(history: Sequence[Message]) -> list[TurnContext]:
    """The stored contexts of the history's turns, oldest first (rows without one, or with a bad one, skipped)."""
    found: list[TurnContext] = []
    for message in history:
        if message.role != "assistant" or not isinstance(message.context, Mapping):
            continue
        try:
            found.append(TurnContext.model_validate(message.context))
        except ValidationError:
            continue
    return found


def next_turn(history: Sequence[Message], contexts: Sequence[TurnContext]) -> int:
    """This turn's number in the session: one after the last stored turn's (or after the remembered turns)."""
    if contexts:
        return contexts[-1].turn + 1
    return sum(1 for m in history if m.role == "user") + 1


# -- what the next message leans on ---------------------------------------------------------------------------
_CUSTOMER_PRONOUN: Final = re.compile(r"\b(he|she|him|his|her|hers|they|them|their|theirs)\b", re.IGNORECASE)
_CUSTOMER_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same|said)\s+(?:customer|client|person|user|guy|man|woman|lady|owner)\b(?!s)", re.IGNORECASE
)
_TICKET_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same|said)\s+(?:ticket|issue|one)\b(?!s)|\b(?:it|its)\b|\b(?:that|this)(?=\W*$)", re.IGNORECASE
)
_ARTICLE_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same)\s+(?:article|guide|policy|one|page|document)\b|\b(?:it|its)\b", re.IGNORECASE
)
_ORDINAL: Final = re.compile(
    r"\b(?:the\s+)?(first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)"
    r"(?:\s+(one|ticket|customer|article|result|record|entry))?\b",
    re.IGNORECASE,
)
_ORDINALS: Final[Mapping[str, int]] = {
    "first": 0,
    "1st": 0,
    "second": 1,
    "2nd": 1,
    "third": 2,
    "3rd": 2,
    "fourth": 3,
    "4th": 3,
    "fifth": 4,
    "5th": 4,
    "last": -1,
}
_ELLIPTIC: Final = re.compile(
    r"^\s*(?:and|also|now|then|ok(?:ay)?,?\s+(?:and|what about)|(?:and\s+)?(?:what|how)\s+about|same\s+for|"
    r"and\s+for|what\s+of)\b",
    re.IGNORECASE,
)
_TICKET_ID: Final = re.compile(r"\b(?:ticket|issue)s?\s*(?:#|no\.?|number|id)?\s*#?(\d{1,9})\b", re.IGNORECASE)
_CUSTOMER_ID: Final = re.compile(r"\b(?:customer|client|account)s?\s*(?:#|no\.?|number|id)?\s*#?(\d{1,9})\b", re.I)
_CITY: Final = re.compile(r"\b(?:in|for|at|from)\s+([A-Z][A-Za-z.'-]+(?:\s+[A-Z][A-Za-z.'-]+)?)")
_ABOUT_PLACE: Final = re.compile(r"\babout\s+([A-Z][A-Za-z.'-]+(?:\s+[A-Z][A-Za-z.'-]+)?)")
_STATUS_WORD: Final = re.compile(r"\b(open|opened|closed|close)\b", re.IGNORECASE)
_TIME_WORD: Final = re.compile(
    r"\b(tomorrow|today|tonight|this (?:morning|afternoon|evening|week|weekend)|next week|now)\b", re.IGNORECASE
)
_COIN: Final = re.compile(r"\b(bitcoin|btc|ethereum|eth|ether|dogecoin|doge|solana|litecoin|xrp|cardano)\b", re.I)
_ABOUT_TICKETS: Final = re.compile(r"\b(?:tickets?|issues?|problems?|complain\w*|filed|opened|reported)\b", re.I)
_PLURAL_TICKETS: Final = re.compile(r"\b(?:tickets|issues)\b", re.IGNORECASE)
_OTHER: Final = re.compile(r"\b(?:other|else|another|remaining|rest)\b", re.IGNORECASE)
_WHO: Final = re.compile(r"^\s*(?:and\s+|so\s+)?(?:who|whose)\b", re.IGNORECASE)
_CITY_QUESTION: Final = re.compile(
    r"\b(?:which|what)\s+city\b|\bwhere\b.*\b(?:live|lives|living|from|based|located)\b|\bwhere\b\W*$", re.IGNORECASE
)
_STATUS_QUESTION: Final = re.compile(r"\bstatus\b|\bstill\s+(?:open|closed)\b|\bresolved\b", re.IGNORECASE)
_GENERIC_PLURAL: Final = re.compile(r"\b(?:all|every|list|how many|count)\b", re.IGNORECASE)

_rules: Final = SupportRules()
_OWN_TOPICS: Final = frozenset({"password topic", "refund topic", "escalation topic"})
_ASKED_AGAIN: Final[Mapping[Asked, str]] = {
    "ticket": "a ticket's status",
    "customer": "a customer's city",
    "customer_tickets": "a customer's tickets",
    "customers_in_city": "the customers in a city",
    "tickets_by_status": "the tickets by status",
    "customers": "the customers",
    "weather": "the weather",
    "crypto": "a price",
    "article": "a help article",
}


def resolve(message: str, history: Sequence[Message]) -> FollowUp:
    """``message`` read against the conversation's stored turn contexts (see the module's docstring)."""
    contexts = contexts_of(history)
    number = next_turn(history, contexts)
    plain = FollowUp(message, message, number)
    if not contexts or pasted_shape(message) is not None or is_not_english(message):
        return plain
    verdict = _rules.match(message)
    if verdict.route in (None, "VECTOR") and contexts[-1].route == "VECTOR":
        # after a help answer: "that policy", "the second one", "how long does it take?" → that article
        if not set(verdict.hits.get("VECTOR", ())) & _OWN_TOPICS:
            found = _article(message, contexts, number)
            if found is not None:
                return found
    if verdict.route == "EXTERNAL" and contexts[-1].route == "EXTERNAL":
        return _elliptic(message, contexts, number, False) or plain  # "and ethereum?" after the bitcoin price
    if verdict.route not in (None, "POSTGRES"):
        return plain  # a help topic, the weather, thanks: the message says where it goes
    for resolver in (_ordinal, _elliptic, _reference, _bare):
        found = resolver(message, contexts, number, verdict.route is None)
        if found is not None:
            return found
    return plain


def _names_own_record(message: str) -> bool:
    return bool(_TICKET_ID.search(message) or _CUSTOMER_ID.search(message) or named_customers(message))


def _carried(what: str, context: TurnContext) -> str:
    return f"{what}, from turn {context.turn}"


def _customer_in_focus(contexts: Sequence[TurnContext]) -> tuple[CustomerRef, TurnContext] | None:
    """The customer of the latest turn that named any customer or ticket, when it named exactly one."""
    for context in reversed(contexts):
        if context.customers or context.tickets:
            customer = context.customer
            return (customer, context) if customer is not None else None
    return None


def _ticket_in_focus(contexts: Sequence[TurnContext]) -> tuple[TicketRef, TurnContext] | None:
    for context in reversed(contexts):
        if context.tickets:
            return (context.tickets[0], context) if len(context.tickets) == 1 else None
        if context.customers:  # the conversation moved on to a customer: "it" is no longer that ticket
            return None
    return None


def _ordinal(message: str, contexts: Sequence[TurnContext], number: int, unrouted: bool = True) -> FollowUp | None:
    found = _ORDINAL.search(message)
    if found is None or _names_own_record(message):
        return None
    latest = contexts[-1]
    noun = (found.group(2) or "").lower()
    index = _ORDINALS[found.group(1).lower()]
    kinds: list[tuple[str, Sequence[object]]] = [
        ("ticket", latest.tickets),
        ("customer", latest.customers),
        ("article", latest.articles),
    ]
    for kind, items in kinds:
        if noun in (kind, "one", "result", "record", "entry", "") and len(items) >= 2:
            if not -len(items) <= index < len(items):
                return None
            item = items[index]
            if isinstance(item, TicketRef):
                phrase = f"ticket {item.id}"
            elif isinstance(item, CustomerRef):
                phrase = item.label
            else:
                phrase = f"the “{item}” article"
            ordinal = f"the {found.group(1).lower()} of its {len(items)} {kind}s"
            text = message[: found.start()] + phrase + message[found.end() :]
            return FollowUp(message, text, number, _carried(f"{phrase} ({ordinal})", latest))
    return None


def _elliptic(message: str, contexts: Sequence[TurnContext], number: int, unrouted: bool) -> FollowUp | None:
    """"what about customer 2?", "and in London?": the previous question asked again about the new thing."""
    if _ELLIPTIC.search(message) is None and not (unrouted and len(message.split()) <= 3):
        return None
    latest = contexts[-1]
    text: str | None = None
    customer_id = _CUSTOMER_ID.search(message)
    names = named_customers(message)
    who = f"customer {customer_id.group(1)}" if customer_id else f"customer {names[0]}" if names else None
    status = _STATUS_WORD.search(message)
    status_word = ("open" if status.group(1).lower().startswith("open") else "closed") if status else None
    if latest.asked == "customer_tickets" and (who or (status_word and not _GENERIC_PLURAL.search(message))):
        owner = who or (latest.customer.label if latest.customer is not None else None)
        if owner is None:
            return None
        text = f"Show the {status_word + ' ' if status_word else ''}tickets of {owner}"
    elif latest.asked == "customer" and who:
        text = f"Which city is {who} from?"
    elif latest.asked == "ticket" and (ticket := _TICKET_ID.search(message)):
        text = f"What is the status of ticket {ticket.group(1)}?"
    elif latest.asked in ("tickets_by_status", "customer_tickets") and status_word:
        text = f"Show the {status_word} tickets"
    elif latest.asked in ("customers_in_city", "weather") and (city := _CITY.search(message) or _place(message)):
        if latest.asked == "weather":
            text = f"What is the weather in {city.group(1)}?"
        else:
            text = f"Which customers are in {city.group(1)}?"
    elif latest.asked == "weather" and (when := _TIME_WORD.search(message)):
        text = f"What is the weather {when.group(1).lower()}?"
    elif latest.asked == "crypto" and (coin := _COIN.search(message)):
        text = f"What is the price of {coin.group(1)}?"
    if text is None or latest.asked is None:
        return None
    return FollowUp(message, text, number, _carried(f"the question ({_ASKED_AGAIN[latest.asked]})", latest))


def _place(message: str) -> re.Match[str] | None:
    """"what about New York?": a capitalised place after "about", when it is not a customer's name."""
    found = _ABOUT_PLACE.search(message)
    return found if found is not None and not named_customers(found.group(1)) else None


def _possessive_swap(message: str, label: str) -> str:
    def swap(match: re.Match[str]) -> str:
        word = match.group(1).lower()
        return f"{label}'s" if word in ("his", "their", "theirs", "hers") else label

    return _CUSTOMER_PRONOUN.sub(swap, message)


def _reference(message: str, contexts: Sequence[TurnContext], number: int, unrouted: bool) -> FollowUp | None:
    """A pronoun or a definite reference to the customer or the ticket in focus."""
    if _names_own_record(message):
        return None
    pronoun = _CUSTOMER_PRONOUN.search(message) or _CUSTOMER_PHRASE.search(message)
    ticket_ref = _TICKET_PHRASE.search(message)
    if pronoun is not None and _GENERIC_PLURAL.search(message) and pronoun.group(0).lower() in ("they", "them"):
        return None  # "list them all": a list, not one customer
    if pronoun is not None or (ticket_ref is not None and _WHO.search(message)):
        focus = _customer_in_focus(contexts)
        if focus is None:
            return None
        customer, context = focus
        ticket = _ticket_in_focus(contexts)
        if _OTHER.search(message) and _ABOUT_TICKETS.search(message) and ticket is not None:
            text = f"Show the tickets of {customer.label} other than ticket {ticket[0].id}"
        elif _WHO.search(message) and not _PLURAL_TICKETS.search(message):
            text = f"Who is {customer.label}?"  # "who opened it?", "who is the customer?": the ticket's customer
        else:
            text = _CUSTOMER_PHRASE.sub(customer.label, _possessive_swap(message, customer.label))
        return FollowUp(message, text, number, _carried(customer.label, context))
    if ticket_ref is not None and contexts[-1].route == "POSTGRES":
        focus_ticket = _ticket_in_focus(contexts[-1:])
        if focus_ticket is None:
            return None
        ticket, context = focus_ticket
        label = f"ticket {ticket.id}"

        def swap(match: re.Match[str]) -> str:
            return f"{label}'s" if match.group(0).lower() == "its" else label

        return FollowUp(message, _TICKET_PHRASE.sub(swap, message), number, _carried(label, context))
    return None


def _bare(message: str, contexts: Sequence[TurnContext], number: int, unrouted: bool) -> FollowUp | None:
    """A short question with nothing to act on: "which city?", "what's the status?", "any other tickets?"."""
    if _names_own_record(message) or _CITY.search(message) or _GENERIC_PLURAL.search(message):
        return None
    latest = contexts[-1]
    if latest.route != "POSTGRES" or len(message.split()) > 8:
        return None
    if _CITY_QUESTION.search(message):
        focus = _customer_in_focus(contexts)
        if focus is not None:
            customer, context = focus
            return FollowUp(message, f"Which city is {customer.label} from?", number, _carried(customer.label, context))
    if _OTHER.search(message) and _ABOUT_TICKETS.search(message):
        focus = _customer_in_focus(contexts)
        ticket = _ticket_in_focus(contexts)
        if focus is not None and ticket is not None:
            customer, context = focus
            text = f"Show the tickets of {customer.label} other than ticket {ticket[0].id}"
            return FollowUp(message, text, number, _carried(customer.label, context))
    if _STATUS_QUESTION.search(message) and not _ABOUT_TICKETS.search(message):
        focus_ticket = _ticket_in_focus(contexts)
        if focus_ticket is not None:
            ticket, context = focus_ticket
            label = f"ticket {ticket.id}"
            return FollowUp(message, f"What is the status of {label}?", number, _carried(label, context))
    return None


def _article(message: str, contexts: Sequence[TurnContext], number: int) -> FollowUp | None:
    """On the VECTOR route: "that policy", "it", "the second one" after a help answer → that article."""
    latest = contexts[-1]
    if not latest.articles:
        return None
    found = _ordinal(message, contexts, number)
    if found is not None:
        return found
    reference = _ARTICLE_PHRASE.search(message)
    if reference is None:
        return None
    title = latest.articles[0]
    if title.lower() in correct_typos(message):
        return None
    phrase = f"the “{title}” article"
    text = message[: reference.start()] + phrase + message[reference.end() :]
    return FollowUp(message, text, number, _carried(phrase, latest))
