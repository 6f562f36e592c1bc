"""The offline SQL source and the composer: fixed templates only (never string-built SQL), grounded answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.apps.support.respond import compose, tokens_of
from routegate.apps.support.sql_templates import TEMPLATES, select_query
from routegate.apps.support.sqlguard import check_sql


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=80), max_size=4))
def test_any_message_selects_a_fixed_template_that_passes_the_guard(message: str, history: list[str]) -> None:
    call = select_query(message, history)
    assert call.query == TEMPLATES[call.template]
    checked = check_sql(call.query, dict(call.params))
    assert checked.tables <= {"customers", "tickets"}


@pytest.mark.parametrize(
    ("message", "template", "params"),
    [
        ("What is the status of ticket 12?", "ticket_by_id", {"id": 12}),
        ("Which city is customer 3 from?", "customer_by_id", {"id": 3}),
        ("Show tickets for customer John", "tickets_by_customer_name", {"name": "%John%"}),
        ("shw tickets for custmer john", "tickets_by_customer_name", {"name": "%john%"}),
        (
            "Does John have any open tickets?",
            "tickets_by_customer_name_and_status",
            {"name": "%John%", "status": "open"},
        ),
        ("Which customers are in London?", "customers_by_city", {"city": "London"}),
        ("list closed tickets", "tickets_by_status", {"status": "closed"}),
        ("show the tickets of customer with id 1", "tickets_by_customer_id", {"customer_id": 1}),
        ("List all customers", "all_customers", {}),
    ],
)
def test_templates_for_typical_questions(message: str, template: str, params: dict[str, object]) -> None:
    call = select_query(message)
    assert (call.template, dict(call.params)) == (template, params)


def test_a_follow_up_takes_its_entity_from_the_conversation() -> None:
    call = select_query("and which tickets does she have?", ["Which city is customer 2 from?"])
    assert (call.template, dict(call.params)) == ("tickets_by_customer_id", {"customer_id": 2})


@given(st.text(max_size=300))
def test_stream_tokens_join_back_to_the_answer(text: str) -> None:
    assert "".join(tokens_of(text)) == text


def test_composer_uses_only_the_evidence() -> None:
    rows = {"rows": [{"id": 3, "name": "Alex Brown", "city": "Toronto"}], "row_count": 1}
    assert compose("Which city?", "POSTGRES", {"result": rows}) == "Alex Brown (customer 3) is from Toronto."
    counted = compose(
        "How many open tickets?",
        "POSTGRES",
        {"result": {"rows": [{"id": 1, "customer": "John Doe", "issue": "Login not working", "status": "open"}] * 2}},
    )
    assert counted.startswith("There are 2 tickets:")


@pytest.mark.parametrize(
    ("route", "fallback", "call", "expected"),
    [
        ("POSTGRES", "empty", {"template": "ticket_by_id", "params": {"id": 12}}, "couldn't find ticket 12"),
        ("POSTGRES", "tool_error:statement_timeout", None, "couldn't look that up"),
        ("POSTGRES", "sql_refused:not_select", None, "couldn't look that up"),
        ("VECTOR", "empty", None, "couldn't find a help article"),
        ("EXTERNAL", "unknown_query", None, "only knows today's weather and the Bitcoin price"),
    ],
)
def test_fallback_answers_say_what_was_missing(
    route: str, fallback: str, call: dict[str, object] | None, expected: str
) -> None:
    assert expected in compose("q", route, {"fallback": fallback, "call": call})
