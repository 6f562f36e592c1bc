"""desk.toml is checked strictly: each mistake is refused with the file, the field and the fix. And the offline
planner, fed any text, only ever produces queries the SQL guard accepts with the desk's allowlist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.configured.config import DeskConfigError, load_config
from routegate.apps.support.planner import SqlPlanner
from routegate.apps.support.rules import SupportRules
from routegate.apps.support.sqlguard import check_sql

GOOD = """
[desk]
name = "shop"
[database]
source = "sql"
sql_file = "shop.sql"
schema = "desk_shop"
[knowledge]
paths = ["docs"]
[[tables]]
name = "customers"
label = "customer"
plural = "customers"
primary_key = "id"
name_column = "name"
columns = ["id", "name", "city"]
[[tables]]
name = "orders"
label = "order"
plural = "orders"
primary_key = "id"
columns = ["id", "customer_id", "status"]
filters = { status = ["open", "shipped"] }
[[tables.foreign_keys]]
column = "customer_id"
references = "customers"
ref_column = "id"
[[routes]]
name = "customers"
kind = "sql"
tables = ["customers"]
[[routes]]
name = "orders"
kind = "sql"
tables = ["orders"]
[[routes]]
name = "knowledge"
kind = "kb"
[[routes]]
name = "chat"
kind = "llm"
"""


def _desk(tmp_path: Path, text: str) -> Path:
    (tmp_path / "shop.sql").write_text("CREATE TABLE customers (id int);", encoding="utf-8")
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "desk.toml").write_text(text, encoding="utf-8")
    return tmp_path


def test_a_good_configuration_loads(tmp_path: Path) -> None:
    config = load_config(_desk(tmp_path, GOOD))
    assert [r.name for r in config.routes] == ["customers", "orders", "knowledge", "chat"]
    assert config.readable_columns()["orders"] == ("id", "customer_id", "status")


@pytest.mark.parametrize(
    ("old", "new", "field", "fix"),
    [
        (
            'name = "chat"\nkind = "llm"',
            'name = "chat"\nkind = "llm"\ncolour = "red"',
            "routes[3] (name = 'chat').colour",
            "unknown field",
        ),
        (
            'tables = ["orders"]\n[[routes]]\nname = "knowledge"',
            '[[routes]]\nname = "knowledge"',
            "routes[1]",
            "needs tables",
        ),
        (
            'tables = ["orders"]',
            'tables = ["invoices"]',
            "routes[1] (name = 'orders').tables",
            "'invoices' is not in [[tables]]",
        ),
        (
            'columns = ["id", "name", "city"]',
            'columns = ["id", "city"]',
            "tables[0]",
            "name_column 'name' is not one of the readable columns",
        ),
        ('kind = "llm"', 'kind = "magic"', "routes[3] (name = 'chat').kind", "'sql', 'kb', 'tool' or 'llm'"),
        (
            'primary_key = "id"\nname_column',
            "primary_key = 7\nname_column",
            "tables[0] (name = 'customers').primary_key",
            "string",
        ),
        ('name = "shop"', 'name = "My Shop"', "desk.name", "pattern"),
        ('[[routes]]\nname = "chat"\nkind = "llm"', "", "routes", 'one route needs kind = "llm"'),
        ('source = "sql"', 'source = "csv"', "database.source", "'sql' or 'url'"),
        ('schema = "desk_shop"', 'schema = "public"', "database", "must start with desk_"),
        (
            'filters = { status = ["open", "shipped"] }',
            'filters = { status = ["open", "shipped"] }\nrow = ["Order {id} of {customer} is {state}."]',
            "tables[1] (name = 'orders').row[0]",
            "{state} is not a field of its rows (id, customer_id, status, customer)",
        ),
        (
            '[[routes]]\nname = "chat"',
            '[answers]\nnot_found = "No {thing} here."\n[[routes]]\nname = "chat"',
            "answers",
            "not_found: unknown field {thing}; it has {looked_for}",
        ),
        (
            'name = "knowledge"\nkind = "kb"',
            'name = "knowledge"\nkind = "kb"\nnot_covered = ["faq"]',
            "routes[2]",
            'not_covered is for routes of kind "tool"',
        ),
        (
            'name = "knowledge"\nkind = "kb"',
            'name = "knowledge"\nkind = "kb"\nrules = [{ name = "refunds", pattern = "refund(s" }]',
            "routes[2] (name = 'knowledge').rules[0] (name = 'refunds').pattern",
            "'refund(s' is not a regular expression (missing ), unterminated subpattern",
        ),
        (
            'name = "knowledge"\nkind = "kb"',
            'name = "knowledge"\nkind = "kb"\nrules = [{ name = "who", pattern = "who are you", about = true }]',
            "routes[2]",
            'rules with about = true are for routes of kind "llm"',
        ),
        (
            'name = "knowledge"\nkind = "kb"',
            'name = "knowledge"\nkind = "kb"\nrules = [{ name = "refunds" }]',
            "routes[2] (name = 'knowledge').rules[0] (name = 'refunds').pattern",
            "required field is missing",
        ),
    ],
)
def test_a_mistake_names_the_file_the_field_and_the_fix(
    tmp_path: Path, old: str, new: str, field: str, fix: str
) -> None:
    assert old in GOOD
    with pytest.raises(DeskConfigError) as caught:
        load_config(_desk(tmp_path, GOOD.replace(old, new, 1)))
    message = str(caught.value)
    assert str(tmp_path / "desk.toml") in message
    assert field in message and fix in message


def test_a_tool_url_must_be_http(tmp_path: Path) -> None:
    text = GOOD + '[[tools]]\nname = "track"\ndescription = "parcels"\nurl = "file:///etc/passwd"\n'
    with pytest.raises(DeskConfigError, match=r"tools\[0\].*not an http\(s\) URL"):
        load_config(_desk(tmp_path, text))


def test_an_unreadable_docs_path_is_named(tmp_path: Path) -> None:
    desk = _desk(tmp_path, GOOD.replace('paths = ["docs"]', 'paths = ["missing-docs"]'))
    with pytest.raises(DeskConfigError, match=r"knowledge.paths\[0\]: .*missing-docs does not exist"):
        load_config(desk)


def test_bad_toml_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DeskConfigError, match="does not exist: create the desk with `routegate desk init"):
        load_config(tmp_path)
    with pytest.raises(DeskConfigError, match="not valid TOML"):
        load_config(_desk(tmp_path, "[desk\nname = 1"))


@pytest.fixture(scope="module")
def planner(tmp_path_factory: pytest.TempPathFactory) -> SqlPlanner:
    return SqlPlanner(load_config(_desk(tmp_path_factory.mktemp("desk"), GOOD)))


ALLOWED = {"customers": ("id", "name", "city"), "orders": ("id", "customer_id", "status")}
WORDS = st.sampled_from(
    [
        "order",
        "orders",
        "customer",
        "customers",
        "Maria",
        "open",
        "shipped",
        "who",
        "how many",
        "city",
        "status",
        "named",
        "for",
        "of",
        "she",
        "1042",
        "#7",
        "'",
        '"',
        ";",
        "--",
        "DROP",
        "pg_authid",
        "%",
        "_",
        "\\",
        "é",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=12))
def test_any_question_gives_only_guarded_parameterised_queries(planner: SqlPlanner, words: list[str]) -> None:
    message = " ".join(words)
    for lookup in planner.plan(message, [message]):
        checked = check_sql(lookup.query, lookup.params, tables=ALLOWED, schema="desk_shop", columns=ALLOWED)
        assert checked.tables <= set(ALLOWED)
        assert all(isinstance(v, int | str) for v in lookup.params.values())
        # the question's words reach the query only as parameters (but for the configuration's own names)
        names = {"order", "orders", "customer", *ALLOWED, *(c for columns in ALLOWED.values() for c in columns)}
        for word in words:
            if len(word) > 3 and word not in names:
                assert word not in lookup.query


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_any_text_is_a_config_or_a_desk_config_error(text: str) -> None:
    from routegate.apps.configured.config import parse_config

    message = "desk.toml: parsed"
    try:
        parse_config(GOOD[: len(GOOD) // 2] + text, Path("desk.toml"))
    except DeskConfigError as exc:  # the only error it may raise, and it names the file
        message = str(exc)
    assert message.startswith("desk.toml")


def test_a_routes_own_rules_settle_it_and_typo_words_are_corrected(tmp_path: Path) -> None:
    """``[router] generated_rules = false``: only the routes' own phrases settle a route (``how many orders`` no
    longer does); ``typo_words``' misspellings are matched as the word."""
    text = GOOD.replace(
        'name = "knowledge"\nkind = "kb"',
        'name = "knowledge"\nkind = "kb"\nrules = [{ name = "returns", pattern = \'\\breturn(?:s|ed)?\\b\' }]',
    ).replace("[[routes]]", '[router]\ngenerated_rules = false\ntypo_words = ["returns"]\n[[routes]]', 1)
    rules = SupportRules.of(load_config(_desk(tmp_path, text)))
    assert rules.match("Can I send it back? Returns?").route == "VECTOR"
    assert rules.match("what about retruns").route == "VECTOR"
    assert rules.match("what about retruns").hits == {"VECTOR": ("returns",)}
    assert rules.match("how many orders are open").route is None
    generated = SupportRules.of(load_config(_desk(tmp_path, GOOD)))
    assert generated.match("how many orders are open").route == "POSTGRES"
    assert generated.match("what about retruns").route is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=24))
@settings(max_examples=150, deadline=None)
def test_a_rule_pattern_loads_exactly_when_it_is_a_regular_expression(pattern: str) -> None:
    from routegate.apps.configured.config import parse_config

    rule = f"rules = [{{ name = 'r', pattern = {json.dumps(pattern, ensure_ascii=False)} }}]"
    text = GOOD.replace('name = "knowledge"\nkind = "kb"', f'name = "knowledge"\nkind = "kb"\n{rule}', 1)
    try:
        re.compile(pattern)
    except re.error:
        compiles = False
    else:
        compiles = bool(pattern)
    if not compiles:
        field = "desk.toml: routes[2] (name = 'knowledge').rules[0] (name = 'r').pattern: "
        with pytest.raises(DeskConfigError, match="^" + re.escape(field)):
            parse_config(text, Path("desk.toml"))
        return
    verdict = SupportRules.of(parse_config(text, Path("desk.toml"))).match(pattern)  # matches without raising
    assert verdict.route in (None, "POSTGRES", "VECTOR", "EXTERNAL", "LLM")


def test_the_state_schema_is_named_or_defaulted_and_never_the_tables_schema(tmp_path: Path) -> None:
    from routegate.apps.configured.database import state_schema

    assert state_schema(load_config(_desk(tmp_path, GOOD))) == f"desk_{load_config(tmp_path).desk.name}_state"
    named = GOOD.replace('schema = "desk_shop"\n', 'schema = "desk_shop"\nstate_schema = "shop_memory"\n', 1)
    assert state_schema(load_config(_desk(tmp_path, named))) == "shop_memory"
    same = GOOD.replace('schema = "desk_shop"\n', 'schema = "desk_shop"\nstate_schema = "desk_shop"\n', 1)
    with pytest.raises(DeskConfigError, match="state_schema 'desk_shop' is the tables' schema"):
        load_config(_desk(tmp_path, same))
