"""How the offline planner reads a question on any desk: a table's `aliases`, `[router] typo_words`, names
(not the verbs around them), `customer with id 3`, a name found in another table's text column, a parent question
the child's row answers, counts that list their rows (`[answers] count` with `{lines}`), and what an empty answer
names (`not_found_name`)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from routegate.apps.configured.config import DeskConfig
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.planner import Lookup, SqlPlanner
from routegate.apps.support.sqlguard import check_sql

SHOP = """
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
columns = ["id", "name", "city"]
types = { id = "integer", name = "text", city = "text" }
[[tables]]
name = "orders"
label = "order"
plural = "orders"
primary_key = "id"
columns = ["id", "customer_id", "status"]
types = { id = "integer", customer_id = "integer", status = "text" }
filters = { status = ["open", "shipped"] }
line = ["order {id} ({status})"]
[[tables.foreign_keys]]
column = "customer_id"
references = "customers"
ref_column = "id"
[[routes]]
name = "chat"
kind = "llm"
"""


def _config(text: str = SHOP, **answers: str) -> DeskConfig:
    data: dict[str, Any] = tomllib.loads(text)
    if answers:
        data["answers"] = answers
    return DeskConfig.model_validate(data)


def _plan(message: str, config: DeskConfig | None = None) -> list[Lookup]:
    config = config or _config()
    lookups = SqlPlanner(config).plan(message)
    columns = config.readable_columns()
    for lookup in lookups:  # every reading still passes the guard with the desk's allowlist
        check_sql(lookup.query, lookup.params, tables=list(columns), schema="public", columns=columns)
    return lookups


def test_aliases_are_read_like_the_label() -> None:
    assert all(lookup.kind != "by_id" for lookup in _plan("status of purchase 1042"))
    aliased = _config(SHOP.replace('plural = "orders"\n', 'plural = "orders"\naliases = ["purchase"]\n'))
    (lookup,) = _plan("status of purchase 1042", aliased)
    assert (lookup.kind, lookup.table, dict(lookup.params)) == ("by_id", "orders", {"id": 1042})


def test_typo_words_are_corrected_and_names_keep_their_capital() -> None:
    assert all(lookup.kind != "by_id" for lookup in _plan("staus of ordeer 1042"))
    words = '[router]\ntypo_words = ["order", "orders", "status"]\n[[routes]]'
    typos = _config(SHOP.replace("[[routes]]", words, 1))
    (lookup,) = _plan("staus of ordeer 1042", typos)
    assert (lookup.kind, dict(lookup.params)) == ("by_id", {"id": 1042})
    assert [r.named for r in _plan("ordrs for Maria Garcia", typos) if r.named] == [("customer", "Maria Garcia")]


@pytest.mark.parametrize(
    ("message", "name"),
    [
        ("Pull up Maria's orders", "Maria"),
        ("Where is Maria Garcia located?", "Maria Garcia"),
        ("Which city does Maria live in?", "Maria"),
        ("Count the orders for maria garcia", "maria garcia"),
    ],
)
def test_a_name_is_read_without_the_verbs_around_it(message: str, name: str) -> None:
    assert [r.named for r in _plan(message) if r.named] == [("customer", name)]
    assert {str(value) for r in _plan(message) for value in r.params.values()} <= {name, f"%{name}%"}


def test_an_id_after_with_id() -> None:
    (lookup,) = _plan("show the orders of customer with id 3")
    assert (lookup.kind, lookup.table, dict(lookup.params)) == ("children", "orders", {"id": 3})


def test_a_name_no_name_column_has_is_looked_for_in_text_columns() -> None:
    readings = _plan("Who lives in Madrid?")
    assert ("filter", "customers", {"value": "Madrid"}) in [(r.kind, r.table, dict(r.params)) for r in readings]


def test_a_question_about_two_tables_lists_the_one_that_names_the_other() -> None:
    (lookup,) = _plan("which customer has the most orders")
    assert (lookup.kind, lookup.table) == ("all", "orders")


def test_a_parent_question_is_answered_by_the_row_when_its_template_names_the_parent() -> None:
    assert _plan("who placed order 1042?")[0].kind == "parent"
    named = _config(
        SHOP.replace('line = ["order {id}', 'row = ["Order {id} of {customer}: {status}."]\nline = ["order {id}')
    )
    assert _plan("who placed order 1042?", named)[0].kind == "by_id"
    assert _plan("which city is the customer of order 1042 from?", named)[0].kind == "parent"  # asks for the city


def test_a_count_lists_its_rows_when_the_wording_has_lines() -> None:
    (counted,) = _plan("how many orders are open")
    assert counted.kind == "count" and "count(*)" in counted.query
    listing = _config(count="There are {count} {plural}:\n{lines}")
    (listed,) = _plan("how many orders are open", listing)
    assert listed.kind == "count" and "count(" not in listed.query and dict(listed.params) == {"v0": "open"}
    rows = [{"id": 1042, "customer_id": 3, "status": "open"}, {"id": 1043, "customer_id": 3, "status": "open"}]
    answer = DeskAnswers(listing).rows({"template": "count", "table": "orders"}, rows)
    assert answer == "There are 2 orders:\n- order 1042 (open)\n- order 1043 (open)"
    assert DeskAnswers(_config()).rows({"template": "count", "table": "orders"}, [{"count": 2}]) == (
        "There are 2 orders (orders)."
    )
    counting = _config(count="{count} {plural} ({looked_for}).")
    assert "count(*)" in _plan("how many orders are open", counting)[0].query  # no {lines}: counted in the database
    call = {"template": "count", "table": "orders", "looked_for": "open orders"}
    assert DeskAnswers(counting).rows(call, [{"count": 2}]) == "2 orders (open orders)."


def test_an_empty_answer_names_the_row_the_question_named() -> None:
    call = {"looked_for": "orders of customer “Alex”", "named": {"label": "customer", "name": "Alex"}}
    plain = DeskAnswers(_config()).fallback("POSTGRES", "empty", call)
    assert plain.startswith("I couldn't find orders of customer “Alex” in our records.")
    worded = DeskAnswers(_config(not_found_name="No {label} matching “{name}” ({looked_for}).")).fallback(
        "POSTGRES", "empty", call
    )
    assert worded == "No customer matching “Alex” (orders of customer “Alex”)."
