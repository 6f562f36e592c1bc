"""What an answered turn established, kept next to its answer in memory for the next turns' follow-ups.

:class:`TurnContext` is a small structured record: the turn's number in the session, its route, the shape of the
question it answered (:data:`Asked`), and the records its evidence named — tickets (with their customer),
customers, articles, a city, a ticket status. :func:`context_of` derives it from the tool's observation (the rows,
the documents, the call's parameters), never from the answer's wording, so it holds whether the composer or a
language model wrote the answer. It is stored as JSON in the ``context`` column of ``support_messages`` (with the
assistant's message) and read back as untrusted data: :func:`contexts_of` skips a row that does not validate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from routegate.apps.support.contracts import Message, SupportRoute

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

_PLANNED_ASKED: Final[Mapping[tuple[str, str], Asked]] = {
    ("by_id", "tickets"): "ticket",
    ("by_id", "customers"): "customer",
    ("by_name", "customers"): "customer",
    ("parent", "customers"): "customer",
    ("children", "tickets"): "customer_tickets",
    ("filter", "tickets"): "tickets_by_status",
    ("all", "tickets"): "tickets_by_status",
    ("all", "customers"): "customers",
}
"""The question's shape by the desk's lookup (:class:`~.planner.Lookup`: its kind and the table its rows come from)."""
_TEMPLATE_ASKED: Final[Mapping[str, Asked]] = {  # turns stored before the desk's SQL came from its planner
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


_PLACE: Final = re.compile(r"\b(?:in|for|at|from)\s+([A-Z][A-Za-z.'-]+(?:\s+[A-Z][A-Za-z.'-]+)?)")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value[:200] if isinstance(value, str) and value.strip() else None


def _status(value: object) -> Literal["open", "closed"] | None:
    if value == "open":
        return "open"
    return "closed" if value == "closed" else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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


def _asked_about(call: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[list[TicketRef], list[CustomerRef]]:
    template, table = str(call.get("template") or ""), call.get("table")
    by_id = template in ("ticket_by_id", "customer_by_id") or (template == "by_id" and table)
    ticket_id = _int(params.get("id")) if template == "ticket_by_id" or (by_id and table == "tickets") else None
    if template == "customer_by_id" or (by_id and table == "customers") or (template == "children" and table):
        customer_id = _int(params.get("id"))  # a customer's own row, or the customer whose rows were asked for
    else:
        customer_id = _int(params.get("customer_id"))
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


def context_of(turn: int, route: SupportRoute, observation: Mapping[str, Any] | None, message: str = "") -> TurnContext:
    """What a turn established, from its tool's observation (``None`` on the LLM route) and the ``message`` it
    answered (a place it named)."""
    observation = observation or {}
    call, result = _mapping(observation.get("call")), _mapping(observation.get("result"))
    if route == "POSTGRES":
        return _postgres_context(turn, call, result)
    if route == "VECTOR":
        documents = [d for d in result.get("documents") or () if isinstance(d, Mapping)]
        titles = [t for t in (_str(d.get("title")) for d in documents) if t is not None]
        return TurnContext(
            turn=turn, route=route, asked="article" if titles else None, articles=tuple(titles[:MAX_REFS])
        )
    if route == "EXTERNAL":
        kind = call.get("type") or call.get("tool")  # the mock's type, or the configured tool's name
        asked: Asked | None = "weather" if kind == "weather" else "crypto" if kind == "crypto" else None
        place = _PLACE.search(str(call.get("query") or message))
        return TurnContext(turn=turn, route=route, asked=asked, city=place.group(1) if place else None)
    return TurnContext(turn=turn, route=route)


def _postgres_context(turn: int, call: Mapping[str, Any], result: Mapping[str, Any]) -> TurnContext:
    params = _mapping(call.get("params"))
    rows = [r for r in result.get("rows") or () if isinstance(r, Mapping)]
    template = str(call.get("template") or "")
    tickets: list[TicketRef] = []
    customers: list[CustomerRef] = []
    if rows and all(_is_ticket_row(r) for r in rows):
        tickets, customers = _tickets_of(rows)
    elif rows:
        customers = _customers_of(rows, params)
    else:  # nothing found: the record asked about is still the one a follow-up means ("his tickets?")
        tickets, customers = _asked_about(call, params)
    city = _str(params.get("city"))
    asked = _TEMPLATE_ASKED.get(template) or _PLANNED_ASKED.get((template, str(call.get("table"))))
    if template == "filter" and call.get("table") == "customers" and "city" in (call.get("focus") or ()):
        asked, city = "customers_in_city", _str(params.get("value"))  # the customers whose city it names
    return TurnContext(
        turn=turn,
        route="POSTGRES",
        asked=asked or (_asked_of(params, tickets) if rows else None),
        tickets=tuple(tickets[:MAX_REFS]),
        customers=tuple(customers[:MAX_REFS]),
        city=city.strip("%") if city else None,
        status=_status(params.get("status")),
    )


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
