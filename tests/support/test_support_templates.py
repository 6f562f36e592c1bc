"""The desk's offline SQL source and its composer, on the built-in configuration: SQL built from the configuration,
never from the question's text (the question only picks tables, columns and parameter values), and grounded
answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.planner import SqlPlanner
from routegate.apps.support.respond import tokens_of
from routegate.apps.support.sqlguard import check_sql

CONFIG = builtin_config()
PLANNER = SqlPlanner(CONFIG)
compose = DeskAnswers(CONFIG).compose


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=80), max_size=4))
def test_any_message_plans_queries_that_pass_the_guard(message: str, history: list[str]) -> None:
    for lookup in PLANNER.plan(message, history):
        checked = check_sql(lookup.query, dict(lookup.params), columns=CONFIG.readable_columns())
        assert checked.tables <= {"customers", "tickets"}


@pytest.mark.parametrize(
    ("message", "kind", "table", "params"),
    [
        ("What is the status of ticket 12?", "by_id", "tickets", {"id": 12}),
        ("Which city is customer 3 from?", "by_id", "customers", {"id": 3}),
        ("Show tickets for customer John", "children", "tickets", {"name": "%John%"}),
        ("shw tickets for custmer john", "children", "tickets", {"name": "%john%"}),
        ("list closed tickets", "filter", "tickets", {"v0": "closed"}),
        ("show the tickets of customer with id 1", "children", "tickets", {"id": 1}),
        ("List all customers", "all", "customers", {}),
    ],
)
def test_lookups_for_typical_questions(message: str, kind: str, table: str, params: dict[str, object]) -> None:
    lookup = PLANNER.plan(message)[0]
    assert (lookup.kind, lookup.table, dict(lookup.params)) == (kind, table, params)


def test_a_follow_up_takes_its_entity_from_the_conversation() -> None:
    lookup = PLANNER.plan("and which tickets does she have?", ["Which city is customer 2 from?"])[0]
    assert (lookup.kind, lookup.table, dict(lookup.params)) == ("children", "tickets", {"id": 2})


@given(st.text(max_size=300))
def test_stream_tokens_join_back_to_the_answer(text: str) -> None:
    assert "".join(tokens_of(text)) == text


def test_composer_uses_only_the_evidence() -> None:
    rows = {"rows": [{"id": 3, "name": "Alex Brown", "city": "Toronto"}], "row_count": 1}
    call = {"template": "by_id", "table": "customers"}
    assert (
        compose("Which city?", "POSTGRES", {"call": call, "result": rows}) == "Alex Brown (customer 3) is from Toronto."
    )
    ticket = {"id": 1, "customer_id": 1, "customer": "John Doe", "issue": "Login not working", "status": "open"}
    counted = compose(
        "How many open tickets?",
        "POSTGRES",
        {"call": {"template": "count", "table": "tickets"}, "result": {"rows": [ticket] * 2}},
    )
    assert counted.startswith("There are 2 tickets:")


@pytest.mark.parametrize(
    ("route", "fallback", "call", "expected"),
    [
        ("POSTGRES", "empty", {"looked_for": "ticket 12"}, "couldn't find ticket 12"),
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
