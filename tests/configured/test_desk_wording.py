"""A desk's own wording (``[answers]``, ``[[tables]] row`` / ``line``): which template words a row, that a value from
the database is only ever text in it, and that the built-in desk's configuration says what the built-in desk always said."""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from routegate.apps.configured.config import DeskConfig, builtin_desk_dir, load_config
from routegate.apps.support.answers import DeskAnswers

CAPABILITIES = (
    "I'm the support desk assistant. I can look up customers and tickets (for example "
    "“What is the status of ticket 1?” or “Show tickets for customer John”), answer questions from our help "
    "articles (password reset, ticket escalation, refunds), and give the weather or the Bitcoin price from a "
    "mock service. Every question goes to exactly one of these sources; when none fits, I answer directly."
)
"""What the built-in desk says it can do (its words before its wording was its configuration's)."""
UNSURE_ANSWER = (
    "I'm not sure what you're asking, so I haven't looked anything up. " + CAPABILITIES + " Could you ask again "
    "in English, in your own words (for example with a ticket number or a customer name)?"
)

SHOP = tomllib.loads(
    """
[desk]
name = "shop"
[database]
source = "url"
schema = "public"
[[tables]]
name = "customers"
label = "customer"
plural = "customers"
primary_key = "id"
name_column = "name"
columns = ["id", "name", "city", "email"]
row = ["{name} lives in {city}."]
[[tables]]
name = "orders"
label = "order"
plural = "orders"
primary_key = "id"
columns = ["id", "customer_id", "status"]
row = ["Order {id} of {customer} is {status}.", "Order {id} is {status}."]
line = ["order {id} ({status})"]
[[tables.foreign_keys]]
column = "customer_id"
references = "customers"
ref_column = "id"
[answers]
kb_quote = "{title} ({source}) says: {content}"
kb_related = " Also: {titles}."
[[routes]]
name = "chat"
kind = "llm"
"""
)


def _answers(**changes: Any) -> DeskAnswers:
    return DeskAnswers(DeskConfig.model_validate({**SHOP, **changes}))


def _rows(answers: DeskAnswers, table: str, rows: list[dict[str, Any]], focus: tuple[str, ...] = ()) -> str:
    return answers.rows({"template": "by_id", "table": table, "focus": focus}, rows)


def test_the_first_template_the_row_fills_and_that_names_the_asked_column_words_it() -> None:
    answers = _answers()
    maria = {"id": 3, "name": "Maria Garcia", "city": "Madrid", "email": "m@example.org"}
    assert _rows(answers, "customers", [maria]) == "Maria Garcia lives in Madrid."
    assert _rows(answers, "customers", [maria], ("city",)) == "Maria Garcia lives in Madrid."
    # the question asked for the email, which the template does not say: the desk's own wording
    assert _rows(answers, "customers", [maria], ("email",)) == "Maria Garcia (customer 3): email is m@example.org."
    order = {"id": 1042, "customer_id": 3, "status": "open", "customer": "Maria Garcia"}
    assert _rows(answers, "orders", [order]) == "Order 1042 of Maria Garcia is open."
    assert _rows(answers, "orders", [{**order, "customer": None}]) == "Order 1042 is open."  # no parent's name
    listed = _rows(answers, "orders", [order, {**order, "id": 1043, "status": "shipped"}])
    assert listed == "I found 2 orders:\n- order 1042 (open)\n- order 1043 (shipped)"


def test_knowledge_answers_follow_the_templates() -> None:
    documents = [
        {"source": "docs/returns.md", "title": "Returns", "content": "30 days."},
        {"source": "docs/shipping.md", "title": "Shipping", "content": "3 days."},
        {"source": "docs/returns.md", "title": "Returns", "content": "Refunds in 5 days."},
    ]
    answer = _answers().compose("can I return it?", "VECTOR", {"result": {"documents": documents}})
    assert answer == "Returns (docs/returns.md) says: 30 days. Also: “Shipping”."


@given(st.dictionaries(st.sampled_from(["id", "name", "city", "email"]), st.text(max_size=30), min_size=4))
def test_a_value_from_the_database_is_only_text(row: dict[str, str]) -> None:
    said = _rows(_answers(), "customers", [row])
    assert said == f"{row['name']} lives in {row['city']}."  # a value holding {city} or {email} is not filled in


def test_the_built_in_configuration_says_what_the_built_in_desk_says() -> None:
    answers = DeskAnswers(load_config(builtin_desk_dir()))
    assert answers.capabilities == CAPABILITIES
    assert answers.unsure() == UNSURE_ANSWER
