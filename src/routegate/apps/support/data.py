"""The spec's fake data, verbatim: customers, tickets, the three help articles and the mock API answers.

``support-routing-contract.txt`` fixes these strings ("No flexibility here — we define exact data"); tests
compare them character for character. The only liberty taken: the spec writes the crypto answer as
``\\$30,000`` (a Markdown escape); the answer is ``$30,000``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Customer:
    id: int
    name: str
    city: str


@dataclass(frozen=True, slots=True)
class Ticket:
    id: int
    customer_id: int
    issue: str
    status: str


@dataclass(frozen=True, slots=True)
class Article:
    id: int
    title: str
    content: str


CUSTOMERS: Final[tuple[Customer, ...]] = (
    Customer(1, "John Doe", "New York"),
    Customer(2, "Jane Smith", "London"),
    Customer(3, "Alex Brown", "Toronto"),
)

TICKETS: Final[tuple[Ticket, ...]] = (
    Ticket(1, 1, "Login not working", "open"),
    Ticket(2, 1, "Password reset issue", "closed"),
    Ticket(3, 2, "Billing question", "open"),
)

ARTICLES: Final[tuple[Article, ...]] = (
    Article(
        1,
        "Password Reset Guide",
        "How to reset your password: click ‘Forgot Password’, enter your email, and follow the reset link.",
    ),
    Article(
        2,
        "Ticket Escalation Policy",
        "Tickets are escalated if unresolved for more than 48 hours. "
        "Escalated tickets are reviewed by senior support staff.",
    ),
    Article(3, "Refund Policy", "Refunds are available within 14 days of purchase if the service was not used."),
)

WEATHER_ANSWER: Final = "The weather today is sunny with a temperature of 25°C."
CRYPTO_ANSWER: Final = "Bitcoin price is $30,000."

TICKET_STATUSES: Final = ("open", "closed")
