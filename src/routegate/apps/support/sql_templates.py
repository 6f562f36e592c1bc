"""The offline SQL source: a parameterised query template chosen from the message — never string-built SQL.

The message only selects a template and fills its *parameters* (an id, a status, a name or city pattern); the
SQL text itself is fixed here and still goes through the SQL guard like any other query. When the message holds
no entity of its own but refers back ("what city is *she* from?"), the last user messages of the session are
searched for one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from routegate.apps.support._stopwords import REQUEST_WORDS
from routegate.apps.support.rules import correct_typos

_TICKET_COLUMNS: Final = "SELECT t.id, t.customer_id, c.name AS customer, t.issue, t.status FROM tickets t "
_JOIN: Final = "JOIN customers c ON c.id = t.customer_id "
TEMPLATES: Final[Mapping[str, str]] = {
    "ticket_by_id": _TICKET_COLUMNS + _JOIN + "WHERE t.id = :id",
    "tickets_by_customer_id": _TICKET_COLUMNS + _JOIN + "WHERE t.customer_id = :customer_id ORDER BY t.id",
    "tickets_by_customer_id_and_status": _TICKET_COLUMNS
    + _JOIN
    + "WHERE t.customer_id = :customer_id AND t.status = :status ORDER BY t.id",
    "tickets_by_customer_id_except": _TICKET_COLUMNS
    + _JOIN
    + "WHERE t.customer_id = :customer_id AND t.id <> :except_id ORDER BY t.id",
    "tickets_by_customer_name": _TICKET_COLUMNS + _JOIN + "WHERE c.name ILIKE :name ORDER BY t.id",
    "tickets_by_customer_name_and_status": _TICKET_COLUMNS
    + _JOIN
    + "WHERE c.name ILIKE :name AND t.status = :status ORDER BY t.id",
    "tickets_by_status": _TICKET_COLUMNS + _JOIN + "WHERE t.status = :status ORDER BY t.id",
    "all_tickets": _TICKET_COLUMNS + _JOIN + "ORDER BY t.id",
    "customer_by_id": "SELECT id, name, city FROM customers WHERE id = :id",
    "customers_by_name": "SELECT id, name, city FROM customers WHERE name ILIKE :name ORDER BY id",
    "customers_by_city": "SELECT id, name, city FROM customers WHERE city ILIKE :city ORDER BY id",
    "all_customers": "SELECT id, name, city FROM customers ORDER BY id",
}

_TICKET_ID = re.compile(r"\b(?:ticket|issue)s?\s*(?:#|no\.?|number|id|nr\.?)?\s*#?(\d{1,9})\b")
_CUSTOMER_ID = re.compile(
    r"\b(?:customer|client|account)s?\s*(?:with\s+)?(?:#|no\.?|number|id|nr\.?)?\s*(?:id\s*)?#?(\d{1,9})\b"
)
_EXCEPT_TICKET = re.compile(r"\s*\b(?:other than|except|besides|apart from|but not)\s+(?:ticket|issue)\s*#?(\d{1,9})\b")
_STATE = re.compile(r"\b(open|closed)\b")
_STATUS = re.compile(r"\b(open|opened|closed|close)\b")
_CITY = re.compile(r"\b(?:in|from|at)\s+([A-Za-z][A-Za-z.'-]+(?:\s+[A-Z][A-Za-z.'-]+)?)")
_ABOUT_TICKETS = re.compile(r"\b(?:tickets?|issues?|problems?|reported|complain\w*|filed|opened)\b")
_REFERS_BACK = re.compile(r"\b(?:he|she|they|him|her|his|hers|their|them|that customer|this customer)\b")
_NAME_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_NAME_INTRO: Final = frozenset({"customer", "named", "called", "for", "of", "by", "does", "did", "has", "is", "find"})
_STOP: Final = REQUEST_WORDS | frozenset(
    [
        "account",
        "accounts",
        "been",
        "belong",
        "belongs",
        "check",
        "cities",
        "city",
        "closed",
        "count",
        "customers",
        "detail",
        "filed",
        "hers",
        "herself",
        "him",
        "himself",
        "id",
        "information",
        "issue",
        "issues",
        "live",
        "lives",
        "located",
        "names",
        "now",
        "number",
        "open",
        "opened",
        "problem",
        "pull",
        "reported",
        "right",
        "status",
        "theirs",
        "themselves",
        "there",
        "ticket",
        "tickets",
        "was",
        "were",
    ]
)
_PLACES: Final = frozenset({"london", "toronto", "new", "york", "paris", "berlin"})


@dataclass(frozen=True, slots=True)
class SqlCall:
    """The Postgres tool's input: the template's name, its SQL and its parameters."""

    template: str
    query: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "query": self.query, "params": dict(self.params)}


def _call(template: str, **params: Any) -> SqlCall:
    return SqlCall(template, TEMPLATES[template], params)


def _name_candidates(text: str) -> list[str]:
    """Capitalised words not opening the sentence, and the word after "customer"/"named"/"for"…, as names."""
    words = _NAME_WORD.findall(text)
    names: list[str] = []
    run: list[str] = []
    for index, word in enumerate(words):
        bare = word.removesuffix("'s").removesuffix("’s")
        lower = correct_typos(bare)
        capitalised = bare[:1].isupper()
        introduced = index > 0 and correct_typos(words[index - 1]) in _NAME_INTRO
        if lower not in _STOP and lower not in _PLACES and len(bare) >= 3 and (capitalised or introduced):
            run.append(bare)
            continue
        if run:
            names.append(" ".join(run))
            run = []
    if run:
        names.append(" ".join(run))
    return names


def named_customers(text: str) -> list[str]:
    """The names a message gives a customer by (``"Show tickets for customer John"`` → ``["John"]``)."""
    return _name_candidates(text)


def _status(text: str) -> str | None:
    found = _STATUS.search(text)
    if found is None:
        return None
    return "open" if found.group(1).startswith("open") else "closed"


def _from_message(original: str) -> SqlCall | None:
    text = correct_typos(original)
    about_tickets = bool(_ABOUT_TICKETS.search(text))
    excluded = _EXCEPT_TICKET.search(text)
    if excluded and (customer := _CUSTOMER_ID.search(text[: excluded.start()] + text[excluded.end() :])):
        # "the tickets of customer 1 other than ticket 1": the customer's other tickets
        return _call(
            "tickets_by_customer_id_except", customer_id=int(customer.group(1)), except_id=int(excluded.group(1))
        )
    if ticket := _TICKET_ID.search(text):
        return _call("ticket_by_id", id=int(ticket.group(1)))
    if customer := _CUSTOMER_ID.search(text):
        if about_tickets and (state := _STATE.search(text)):  # "open" or "closed", not "opened" (who opened it)
            return _call("tickets_by_customer_id_and_status", customer_id=int(customer.group(1)), status=state.group(1))
        if about_tickets:
            return _call("tickets_by_customer_id", customer_id=int(customer.group(1)))
        return _call("customer_by_id", id=int(customer.group(1)))
    names = _name_candidates(original)
    status = _status(text)
    if names:
        pattern = f"%{names[0]}%"
        if about_tickets and status:
            return _call("tickets_by_customer_name_and_status", name=pattern, status=status)
        if about_tickets:
            return _call("tickets_by_customer_name", name=pattern)
        return _call("customers_by_name", name=pattern)
    if not about_tickets and (city := _CITY.search(original)) and city.group(1).lower() not in _STOP:
        return _call("customers_by_city", city=city.group(1))
    return None


def select_query(message: str, history: Sequence[str] = ()) -> SqlCall:
    """The template and parameters for ``message``; ``history`` holds earlier user messages, newest last."""
    found = _from_message(message)
    if found is not None:
        return found
    text = correct_typos(message)
    if _REFERS_BACK.search(text):
        about_tickets = bool(_ABOUT_TICKETS.search(text))
        for earlier in reversed(history):
            previous = _from_message(earlier)
            if previous is None or ("name" not in previous.params and "id" not in previous.params):
                continue
            if previous.template == "customer_by_id" and about_tickets:
                return _call("tickets_by_customer_id", customer_id=previous.params["id"])
            if previous.template == "customers_by_name" and about_tickets:
                return _call("tickets_by_customer_name", name=previous.params["name"])
            if previous.template.startswith("tickets_by_customer_name") and not about_tickets:
                return _call("customers_by_name", name=previous.params["name"])
            return previous
    status = _status(text)
    if _ABOUT_TICKETS.search(text):
        return _call("tickets_by_status", status=status) if status else _call("all_tickets")
    return _call("all_customers")
