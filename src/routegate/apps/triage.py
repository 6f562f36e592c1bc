"""The routing agent's example: billing / technical / sales specialists behind a governed router.

The specialists are deterministic learning mocks (fixed data); each answers ``needs_reroute`` when a
ticket is not for its domain, so a wrong first route is corrected by a reroute, not by a made-up answer.
"""

from __future__ import annotations

import re
from typing import Any

from routegate.core import Budget, Finalizer, Router, TicketArgs, worker
from routegate.plan import RoutingAgent
from routegate.routers.rules import KeywordRouter

USERS: dict[int, dict[str, Any]] = {
    42: {"id": 42, "name": "Anna", "country": "US", "tier": "pro"},
    7: {"id": 7, "name": "Max", "country": "US", "tier": "free"},
}
BILLING: dict[int, dict[str, Any]] = {
    42: {"currency": "USD", "plan": "pro_monthly", "price_usd": 49.0, "days_since_first_payment": 10},
    7: {"currency": "USD", "plan": "free", "price_usd": 0.0, "days_since_first_payment": 120},
}
REFUND_WINDOW_DAYS = 14
DEFAULT_USER_ID = 42

_USER_ID = re.compile(r"user_id\s*=\s*(\d+)")

BILLING_WORDS = ("refund", "charge", "charged", "billing", "invoice")
TECHNICAL_WORDS = ("error", "bug", "incident", "api", "latency", "outage", "down")
SALES_WORDS = ("price", "pricing", "quote", "plan", "discount")


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in words)


def _user_id(ticket: str) -> int:
    found = _USER_ID.search(ticket)
    return int(found.group(1)) if found else DEFAULT_USER_ID


def _not_mine(domain: str) -> dict[str, Any]:
    """A specialist's answer to a ticket outside its domain: the router should choose again."""
    return {"status": "needs_reroute", "reason": f"ticket_not_{domain}", "domain": domain}


def _answer(ticket: str, domain: str, words: tuple[str, ...], result: dict[str, Any]) -> dict[str, Any]:
    """A specialist's answer: ``result`` when ``ticket`` mentions one of ``words`` (its domain), else
    :func:`_not_mine`."""
    if not _mentions(ticket, words):
        return _not_mine(domain)
    return {"status": "done", "domain": domain, "result": result}


@worker(args=TicketArgs, inline=True, description="Handle refunds, charges, invoices, and billing policy")
def billing_specialist(ticket: str) -> dict[str, Any]:
    if not _mentions(ticket, ("refund", "charge", "billing", "invoice")):
        return _not_mine("billing")
    user_id = _user_id(ticket)
    user, account = USERS.get(user_id), BILLING.get(user_id)
    if user is None or account is None:
        return {"status": "done", "domain": "billing", "error": "user_not_found"}
    refundable = account["plan"] == "pro_monthly" and account["days_since_first_payment"] <= REFUND_WINDOW_DAYS
    return {
        "status": "done",
        "domain": "billing",
        "result": {
            "user_name": user["name"],
            "plan": account["plan"],
            "currency": account["currency"],
            "refund_eligible": refundable,
            "refund_amount_usd": account["price_usd"] if refundable else 0.0,
            "reason": f"Pro monthly subscriptions are refundable within {REFUND_WINDOW_DAYS} days.",
        },
    }


@worker(args=TicketArgs, inline=True, description="Handle errors, incidents, API issues, and outages")
def technical_specialist(ticket: str) -> dict[str, Any]:
    incident = {"incident_id": "INC-4021", "service": "public-api", "state": "mitigated", "next_update_in_minutes": 30}
    return _answer(ticket, "technical", ("error", "bug", "incident", "api", "latency"), incident)


@worker(args=TicketArgs, inline=True, description="Handle pricing, plan recommendations, and quotes")
def sales_specialist(ticket: str) -> dict[str, Any]:
    quote = {
        "recommended_plan": "team_plus",
        "currency": "USD",
        "monthly_price_usd": 199.0,
        "reason": "Best fit for teams that need priority support and usage controls.",
    }
    return _answer(ticket, "sales", ("price", "pricing", "quote", "plan", "discount"), quote)


SPECIALISTS = (billing_specialist, technical_specialist, sales_specialist)
DEMO_GOAL = (
    "User Anna (user_id=42) asks: Can I get a refund for my pro_monthly subscription "
    "charged 10 days ago? Route to the correct specialist and provide a short final answer."
)
DEMO_BUDGET = Budget(max_route_attempts=3, max_delegations=3, max_seconds=60)


def triage_rules() -> KeywordRouter:
    """The offline router for the demo: signal words per specialist, billing first."""
    return KeywordRouter(
        {
            "billing_specialist": BILLING_WORDS,
            "technical_specialist": TECHNICAL_WORDS,
            "sales_specialist": SALES_WORDS,
        }
    )


def build_triage_agent(
    *,
    router: Router | None = None,
    finalizer: Finalizer | None = None,
    budget: Budget | None = None,
    policy_allow: set[str] | None = None,
    execution_allow: set[str] | None = None,
) -> RoutingAgent:
    """The example's agent; offline (keyword router, grounded composer) unless a router/finalizer is given."""
    return RoutingAgent(
        workers=SPECIALISTS,
        router=router or triage_rules(),
        finalizer=finalizer,
        budget=budget or DEMO_BUDGET,
        policy_allow=policy_allow,
        execution_allow=execution_allow,
        name="triage",
    )
