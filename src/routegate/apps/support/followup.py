"""Follow-ups: what the last turns established, and the next message's references resolved against it.

Each answered turn leaves a small structured record next to its answer in memory (:class:`.turn_context.TurnContext`:
the tickets, customers, articles, city and route it established, derived from its evidence). :func:`resolve` reads the next message against those records and, when the message leans on them, rewrites it into
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
from functools import cache
from typing import Any, Final

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support._names import builtin_vocabulary, named_customers
from routegate.apps.support.contracts import Message
from routegate.apps.support.rules import SupportRules, correct_typos
from routegate.apps.support.turn_context import Asked, CustomerRef, TicketRef, TurnContext, contexts_of, next_turn
from routegate.apps.support.unsure import is_not_english, pasted_shape


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


_CUSTOMER_PRONOUN: Final = re.compile(r"\b(he|she|him|his|her|hers|they|them|their|theirs)\b", re.IGNORECASE)
_CUSTOMER_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same|said)\s+(?:customer|client|person|user|guy|man|woman|lady|owner)\b(?!s)", re.IGNORECASE
)
_THAT_TICKET: Final = re.compile(r"\b(?:the|that|this|same|said)\s+(?:ticket|issue)\b(?!s)", re.IGNORECASE)
_TICKET_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same|said)\s+(?:ticket|issue|one)\b(?!s)|\b(?:it|its)\b|\b(?:that|this)(?=\W*$)", re.IGNORECASE
)
_ARTICLE_PHRASE: Final = re.compile(
    r"\b(?:the|that|this|same)\s+(?:article|guide|policy|one|page|document)\b|\b(?:it|its)\b|\b(?:that|this)(?=\W*$)",
    re.IGNORECASE,
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


@cache
def builtin_rules() -> SupportRules:
    """The rules the reader asks where a message goes (the built-in desk's: a help topic, the weather, thanks are
    not follow-ups of a lookup), one instance and one cache of verdicts."""
    return SupportRules.of(builtin_config())


def resolve(message: str, history: Sequence[Message]) -> FollowUp:
    """``message`` read against the conversation's stored turn contexts (see the module's docstring)."""
    contexts = contexts_of(history)
    number = next_turn(history, contexts)
    if not contexts or pasted_shape(message) is not None or is_not_english(message):
        return FollowUp(message, message, number)
    verdict = builtin_rules().match(message)
    reading = _Reading(message, tuple(contexts), number, unrouted=verdict.route is None)
    latest = contexts[-1]
    found: FollowUp | None = None
    if verdict.route in (None, "VECTOR") and latest.route == "VECTOR":
        # after a help answer: "that policy", "how long does it take?" → that article (unless it names a topic)
        if not set(verdict.hits.get("VECTOR", ())) & _OWN_TOPICS:
            found = _article(reading)
    elif verdict.route == "EXTERNAL" and latest.route == "EXTERNAL":
        found = _elliptic(reading)  # "and ethereum?" after the bitcoin price
    if found is None and verdict.route in (None, "POSTGRES"):
        # a help topic, the weather, thanks: the message says where it goes; otherwise the first reading that fits
        found = _ordinal(reading) or _elliptic(reading) or _reference(reading) or _bare(reading)
    return found or FollowUp(message, message, number)


@dataclass(frozen=True, slots=True)
class _Reading:
    message: str
    contexts: tuple[TurnContext, ...]
    number: int
    unrouted: bool  # the rules found no route of the message's own

    @property
    def latest(self) -> TurnContext:
        return self.contexts[-1]

    def carried(self, text: str, what: str, context: TurnContext) -> FollowUp:
        return FollowUp(self.message, text, self.number, f"{what}, from turn {context.turn}")


def _names_own_record(message: str) -> bool:
    return bool(_TICKET_ID.search(message) or _CUSTOMER_ID.search(message) or named_customers(message))


def _customer_in_focus(contexts: Sequence[TurnContext]) -> tuple[CustomerRef, TurnContext] | None:
    """The customer of the latest turn that named any customer or ticket, when it named exactly one."""
    for context in reversed(contexts):
        if context.customers or context.tickets:
            customer = context.customer
            return (customer, context) if customer is not None else None
    return None


def _ticket_in_focus(contexts: Sequence[TurnContext]) -> tuple[TicketRef, TurnContext] | None:
    """The ticket of the latest turn that named a ticket, when it named exactly one and no customer came after."""
    for context in reversed(contexts):
        if context.tickets:
            return (context.tickets[0], context) if len(context.tickets) == 1 else None
        if context.customers:  # the conversation moved on to a customer: "it" is no longer that ticket
            return None
    return None


def _customers_ticket(contexts: Sequence[TurnContext], customer: CustomerRef) -> TicketRef | None:
    """The ticket of ``customer`` the conversation last talked about alone ("his *other* tickets")."""
    for context in reversed(contexts):
        ticket = context.ticket
        if ticket is not None and customer.id is not None and ticket.customer_id == customer.id:
            return ticket
    return None


def _ordinal(reading: _Reading) -> FollowUp | None:
    """ "and the second one?": the item of the list the last answer gave."""
    found = _ORDINAL.search(reading.message)
    if found is None or _names_own_record(reading.message):
        return None
    latest = reading.latest
    noun = (found.group(2) or "").lower()
    index = _ORDINALS[found.group(1).lower()]
    phrases: list[tuple[str, list[str]]] = [
        ("ticket", [f"ticket {t.id}" for t in latest.tickets]),
        ("customer", [c.label for c in latest.customers]),
        ("article", [f"the “{title}” article" for title in latest.articles]),
    ]
    for kind, items in phrases:
        if noun in (kind, "one", "result", "record", "entry", "") and len(items) >= 2:
            if not -len(items) <= index < len(items):
                return None
            phrase = items[index]
            text = reading.message[: found.start()] + phrase + reading.message[found.end() :]
            which = f"the {found.group(1).lower()} of its {len(items)} {kind}s"
            return reading.carried(text, f"{phrase} ({which})", latest)
    return None


def _elliptic(reading: _Reading) -> FollowUp | None:
    """ "what about customer 2?", "and in London?": the previous question asked again about the new thing."""
    message, latest = reading.message, reading.latest
    if _ELLIPTIC.search(message) is None and not (reading.unrouted and len(message.split()) <= 3):
        return None
    customer_id = _CUSTOMER_ID.search(message)
    names = named_customers(message)
    who = f"customer {customer_id.group(1)}" if customer_id else f"customer {names[0]}" if names else None
    status = _STATUS_WORD.search(message)
    state = ("open" if status.group(1).lower().startswith("open") else "closed") if status else None
    generic = _GENERIC_PLURAL.search(message) is not None  # "and show all open tickets": not this customer's
    text: str | None = None
    if latest.asked == "customer_tickets" and (who or (state and not generic)):
        owner = who or (latest.customer.label if latest.customer is not None else None)
        if owner is not None:
            text = f"Show the {state + ' ' if state else ''}tickets of {owner}"
    elif latest.asked == "customer" and who:
        text = f"Which city is {who} from?"
    elif latest.asked == "ticket" and (ticket := _TICKET_ID.search(message)):
        text = f"What is the status of ticket {ticket.group(1)}?"
    elif latest.asked == "tickets_by_status" and state:
        text = f"Show the {state} tickets"
    elif latest.asked in ("customers_in_city", "weather") and (city := _CITY.search(message) or _place(message)):
        text = f"{'What is the weather' if latest.asked == 'weather' else 'Which customers are'} in {city.group(1)}?"
    elif latest.asked == "weather" and (when := _TIME_WORD.search(message)):
        text = f"What is the weather {when.group(1).lower()}?"
    elif latest.asked == "crypto" and (coin := _COIN.search(message)):
        text = f"What is the price of {coin.group(1)}?"
    if text is None or latest.asked is None:
        return None
    return reading.carried(text, f"the question ({_ASKED_AGAIN[latest.asked]})", latest)


def _place(message: str) -> re.Match[str] | None:
    """ "what about New York?": a capitalised place after "about", when it is not a customer's name."""
    found = _ABOUT_PLACE.search(message)
    return found if found is not None and not named_customers(found.group(1)) else None


def _customer_swap(message: str, label: str) -> str:
    """The customer's pronouns and definite references in ``message`` replaced by ``label`` (``customer 1``)."""

    def swap(match: re.Match[str]) -> str:
        return f"{label}'s" if match.group(1).lower() in ("his", "their", "theirs", "hers") else label

    return _CUSTOMER_PHRASE.sub(label, _CUSTOMER_PRONOUN.sub(swap, message))


def _other_tickets(customer: CustomerRef, ticket: TicketRef) -> str:
    return f"Show the tickets of {customer.label} other than ticket {ticket.id}"


def _reference(reading: _Reading) -> FollowUp | None:
    """A pronoun or a definite reference to the customer or the ticket in focus."""
    message = reading.message
    if _names_own_record(message):
        return None
    pronoun = _CUSTOMER_PRONOUN.search(message) or _CUSTOMER_PHRASE.search(message)
    ticket_ref = _TICKET_PHRASE.search(message)
    if pronoun is not None and _GENERIC_PLURAL.search(message) and pronoun.group(0).lower() in ("they", "them"):
        return None  # "list them all": a list, not one customer
    if pronoun is not None or (ticket_ref is not None and _WHO.search(message)):
        focus = _customer_in_focus(reading.contexts)
        if focus is None:
            return None
        customer, context = focus
        ticket = _customers_ticket(reading.contexts, customer)
        if _OTHER.search(message) and _ABOUT_TICKETS.search(message) and ticket is not None:
            text = _other_tickets(customer, ticket)
        elif _WHO.search(message) and not _PLURAL_TICKETS.search(message):
            text = f"Who is {customer.label}?"  # "who opened it?", "who is the customer?": the ticket's customer
        else:
            text = _customer_swap(message, customer.label)
        return reading.carried(text, customer.label, context)
    if ticket_ref is not None and (reading.latest.route == "POSTGRES" or _THAT_TICKET.search(message)):
        # "it" is the last answer's ticket, or nothing; "that ticket" the last one talked about
        in_focus = _ticket_in_focus(reading.contexts if _THAT_TICKET.search(message) else reading.contexts[-1:])
        if in_focus is None:
            return None
        label = f"ticket {in_focus[0].id}"

        def swap(match: re.Match[str]) -> str:
            return f"{label}'s" if match.group(0).lower() == "its" else label

        return reading.carried(_TICKET_PHRASE.sub(swap, message), label, in_focus[1])
    return None


def _bare(reading: _Reading) -> FollowUp | None:
    """A short question with nothing to act on: "which city?", "what's the status?", "any other tickets?"."""
    message = reading.message
    if _names_own_record(message) or _CITY.search(message) or _GENERIC_PLURAL.search(message):
        return None
    if reading.latest.route != "POSTGRES" or len(message.split()) > 8:
        return None
    customer = _customer_in_focus(reading.contexts)
    ticket = _ticket_in_focus(reading.contexts)
    if _CITY_QUESTION.search(message) and customer is not None:
        return reading.carried(f"Which city is {customer[0].label} from?", customer[0].label, customer[1])
    if _OTHER.search(message) and _ABOUT_TICKETS.search(message) and customer is not None:
        own = _customers_ticket(reading.contexts, customer[0])
        if own is not None:
            return reading.carried(_other_tickets(customer[0], own), customer[0].label, customer[1])
    if _STATUS_QUESTION.search(message) and not _ABOUT_TICKETS.search(message) and ticket is not None:
        label = f"ticket {ticket[0].id}"
        return reading.carried(f"What is the status of {label}?", label, ticket[1])
    return None


def _article(reading: _Reading) -> FollowUp | None:
    """After a help answer: "that policy", "it", "the second one" → that article."""
    latest = reading.latest
    if not latest.articles:
        return None
    found = _ordinal(reading)
    if found is not None:
        return found
    reference = _ARTICLE_PHRASE.search(reading.message)
    title = latest.articles[0]
    if reference is None or title.lower() in correct_typos(reading.message, builtin_vocabulary()):
        return None
    phrase = f"the “{title}” article"
    text = reading.message[: reference.start()] + phrase + reading.message[reference.end() :]
    return reading.carried(text, phrase, latest)
