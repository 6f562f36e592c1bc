"""The SQL guard and the Postgres tool against a hostile corpus, on the real embedded PostgreSQL.

Every hostile input must be refused with a clear error, and the database must be unchanged afterwards
(checksum of every row of every table in the test's schema, plus the list of relations and roles).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.apps.support import postgres_tool as postgres_tool_module
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.sqlguard import CheckedQuery, SqlRefusedError, check_sql

HOSTILE: list[tuple[str, Any]] = [
    # DML / DDL
    ("DELETE FROM tickets", None),
    ("UPDATE customers SET city = 'Paris'", None),
    ("INSERT INTO customers (id, name, city) VALUES (9, 'Eve', 'Nowhere')", None),
    ("DROP TABLE customers", None),
    ("TRUNCATE tickets", None),
    ("ALTER TABLE customers ADD COLUMN pwned text", None),
    ("CREATE TABLE stolen AS SELECT * FROM customers", None),
    ("SELECT * INTO stolen FROM customers", None),
    ("MERGE INTO tickets t USING customers c ON t.customer_id = c.id WHEN MATCHED THEN DELETE", None),
    ("GRANT ALL ON customers TO PUBLIC", None),
    ("REVOKE SELECT ON customers FROM PUBLIC", None),
    ("CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", None),
    ("COMMENT ON TABLE customers IS 'x'", None),
    # stacked statements and comments
    ("SELECT * FROM customers; DROP TABLE tickets", None),
    ("SELECT * FROM customers; DELETE FROM tickets;", None),
    ("SELECT 1; SELECT 2", None),
    ("SELECT * FROM customers /* harmless */; UPDATE tickets SET status = 'closed'", None),
    ("SELECT * FROM customers -- comment\n; DROP TABLE customers", None),
    ("/* only a comment */", None),
    ("-- DROP TABLE customers", None),
    # writable CTEs
    ("WITH d AS (DELETE FROM tickets RETURNING *) SELECT * FROM d", None),
    ("WITH u AS (UPDATE customers SET city = 'x' RETURNING id) SELECT * FROM customers", None),
    ("WITH i AS (INSERT INTO tickets VALUES (9, 1, 'x', 'open') RETURNING id) SELECT 1", None),
    # side-effect and dangerous functions
    ("SELECT pg_sleep(10)", None),
    ("SELECT * FROM customers WHERE pg_sleep(5) IS NOT NULL", None),
    ("SELECT pg_read_file('/etc/passwd')", None),
    ("SELECT pg_read_binary_file('/etc/passwd')", None),
    ("SELECT pg_ls_dir('.')", None),
    ("SELECT lo_import('/etc/passwd')", None),
    ("SELECT set_config('statement_timeout', '0', false)", None),
    ("SELECT current_setting('data_directory')", None),
    ("SELECT pg_terminate_backend(pg_backend_pid())", None),
    ("SELECT pg_advisory_lock(1)", None),
    ("SELECT nextval('support_messages_id_seq')", None),
    ("SELECT setval('support_messages_id_seq', 1)", None),
    ("SELECT txid_current()", None),
    ("SELECT dblink_exec('dbname=postgres', 'DROP TABLE customers')", None),
    ("SELECT query_to_xml('DELETE FROM tickets', true, true, '')", None),
    ("SELECT pg_reload_conf()", None),
    ("SELECT version()", None),
    ("SELECT * FROM generate_series(1, 100000000)", None),
    ("SELECT name FROM customers WHERE id = (SELECT pg_sleep(5))::int", None),
    # COPY, SET, DO and other utility statements
    ("COPY customers TO '/tmp/customers.csv'", None),
    ("COPY customers FROM PROGRAM 'id'", None),
    ("SET ROLE postgres", None),
    ("SET statement_timeout = 0", None),
    ("RESET ALL", None),
    ("DO $$ BEGIN DELETE FROM tickets; END $$", None),
    ("CALL some_procedure()", None),
    ("EXPLAIN ANALYZE DELETE FROM tickets", None),
    ("VACUUM customers", None),
    ("LOCK TABLE customers IN ACCESS EXCLUSIVE MODE", None),
    ("LISTEN x", None),
    ("NOTIFY x", None),
    ("PREPARE p AS DELETE FROM tickets", None),
    ("EXECUTE p", None),
    ("BEGIN", None),
    ("COMMIT", None),
    ("SHOW ALL", None),
    # system catalogs and other tables
    ("SELECT * FROM pg_catalog.pg_user", None),
    ("SELECT * FROM pg_shadow", None),
    ("SELECT * FROM pg_stat_activity", None),
    ("SELECT * FROM information_schema.tables", None),
    ("SELECT * FROM support_messages", None),
    ("SELECT * FROM kb_articles", None),
    ("SELECT * FROM public.customers", None),
    ("SELECT c.* FROM customers c JOIN pg_roles r ON true", None),
    ("SELECT * FROM customers UNION SELECT usename, passwd, '' FROM pg_shadow", None),
    ("SELECT * FROM customers WHERE id IN (SELECT id FROM support_messages)", None),
    ('SELECT * FROM "CUSTOMERS"', None),
    # locking clauses
    ("SELECT * FROM customers FOR UPDATE", None),
    ("SELECT * FROM tickets FOR SHARE", None),
    ("SELECT * FROM tickets FOR NO KEY UPDATE SKIP LOCKED", None),
    # type tricks, casts and literals
    ("SELECT 'customers'::regclass", None),
    ("SELECT CAST('pg_shadow' AS regclass)", None),
    ("SELECT $$x$$", None),
    ("SELECT * FROM customers WHERE name = $1", None),
    ("SELECT * FROM (VALUES (1)) AS v", None),
    ("SELECT * FROM customers, LATERAL (SELECT pg_sleep(1)) AS x", None),
    # malformed input and bad params
    ("", None),
    ("   ", None),
    ("SELEC * FROM customers", None),
    ("SELECT * FROM customers WHERE id = :id", None),
    ("SELECT * FROM customers WHERE id = :id", {"id": 1, "extra": 2}),
    ("SELECT * FROM customers WHERE id = :id", {"id": {"$gt": 0}}),
    ("SELECT * FROM customers WHERE name = :n", {"n": "x" * 10_000}),
    ("SELECT * FROM customers WHERE name = 'a\x00b'", None),
    ("SELECT " + " + ".join(["1"] * 2000) + " FROM customers", None),
    (12345, None),
    (None, None),
    (["SELECT 1"], None),
]


async def _checksum(db: SupportDatabase) -> str:
    """md5 of every row of every table in the test's schema, the schema's relations and the roles."""
    async with db.connection() as conn:
        tables = await (
            await conn.execute(
                "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s ORDER BY relname",
                (db.schema,),
            )
        ).fetchall()
        parts = [",".join(f"{t['relname']}" for t in tables)]
        roles = await (
            await conn.execute("SELECT string_agg(rolname, ',' ORDER BY rolname) AS r FROM pg_roles")
        ).fetchone()
        parts.append(str(roles))
        for t in tables:
            kind = await (
                await conn.execute(
                    "SELECT relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND relname = %s",
                    (db.schema, t["relname"]),
                )
            ).fetchone()
            if kind is not None and kind["relkind"] == "r":
                row = await (
                    await conn.execute(
                        f"SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) AS h FROM \"{t['relname']}\" x"
                    )
                ).fetchone()
                parts.append(f"{t['relname']}={row['h'] if row else ''}")
        setting = await (await conn.execute("SELECT current_setting('statement_timeout') AS s")).fetchone()
        parts.append(str(setting))
    return "\n".join(parts)


def test_the_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 50


@pytest.mark.integration
async def test_every_hostile_input_is_refused_and_the_database_is_unchanged(db: SupportDatabase) -> None:
    tool = PostgresTool(db)
    before = await _checksum(db)
    for query, params in HOSTILE:
        with pytest.raises(SqlRefusedError) as refused:
            await tool.run(query, params)  # type: ignore[arg-type]  # hostile inputs include non-strings
        message = str(refused.value)
        assert message.startswith(f"query refused ({refused.value.code}): "), (query, message)
        assert len(message) > 30, (query, message)
    assert await _checksum(db) == before


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("DELETE FROM tickets", "not_select"),
        ("SELECT 1; DROP TABLE tickets", "not_one_statement"),
        ("SELECT pg_sleep(1)", "function_not_allowed"),
        ("SELECT * FROM pg_shadow", "table_not_allowed"),
        ("SELECT * FROM customers FOR UPDATE", "forbidden_clause"),
        ("WITH d AS (DELETE FROM tickets RETURNING *) SELECT * FROM d", "construct_not_allowed"),
        ("SELECT * INTO x FROM customers", "forbidden_clause"),
        ("DO $$ BEGIN END $$", "not_select"),
        ("SELEC 1", "parse_error"),
        ("", "empty"),
    ],
)
def test_refusals_name_the_problem(query: str, code: str) -> None:
    with pytest.raises(SqlRefusedError) as refused:
        check_sql(query)
    assert refused.value.code == code


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM customers",
        "select id, name from customers where city = 'London'",
        "SELECT t.id, t.issue, c.name FROM tickets t JOIN customers c ON c.id = t.customer_id",
        "SELECT status, count(*) AS n FROM tickets GROUP BY status ORDER BY n DESC LIMIT 5",
        "SELECT * FROM customers WHERE id IN (SELECT customer_id FROM tickets WHERE status = 'open')",
        "WITH open_tickets AS (SELECT * FROM tickets WHERE status = 'open') SELECT * FROM open_tickets",
        "SELECT upper(name), coalesce(city, '?') FROM customers WHERE lower(name) LIKE 'j%';",
    ],
)
def test_plain_reads_pass(query: str) -> None:
    checked = check_sql(query)
    assert checked.sql.upper().startswith(("SELECT", "WITH"))


def test_what_runs_is_the_guards_rendering_with_named_placeholders() -> None:
    checked = check_sql("SELECT name FROM customers WHERE name ILIKE :p AND city LIKE '%o%'", {"p": "%j%"})
    # every identifier quoted: no keyword (user, current_role) or case folding can change what a name means
    assert checked.sql == 'SELECT "name" FROM "customers" WHERE "name" ILIKE %(p)s AND "city" LIKE \'%%o%%\''

    assert checked.params == {"p": "%j%"}
    assert checked.tables == frozenset({"customers"})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_is_refused_or_is_a_plain_select(text: str) -> None:
    try:
        checked = check_sql(text)
    except SqlRefusedError:
        return
    assert checked.sql.upper().startswith(("SELECT", "WITH"))
    assert checked.tables <= {"customers", "tickets"}


# -- the tool's success criteria (spec: "Implement Tools Only") -----------------------------------------------
@pytest.mark.integration
async def test_fetch_all_customers(db: SupportDatabase) -> None:
    result = await PostgresTool(db).run("SELECT id, name, city FROM customers ORDER BY id")
    assert result.row_count == 3
    assert [r["name"] for r in result.rows] == ["John Doe", "Jane Smith", "Alex Brown"]


@pytest.mark.integration
async def test_fetch_tickets_by_customer(db: SupportDatabase) -> None:
    result = await PostgresTool(db).run(
        "SELECT id, issue, status FROM tickets WHERE customer_id = :cid ORDER BY id", {"cid": 1}
    )
    assert result.to_dict() == {
        "rows": [
            {"id": 1, "issue": "Login not working", "status": "open"},
            {"id": 2, "issue": "Password reset issue", "status": "closed"},
        ],
        "row_count": 2,
        "truncated": False,
    }


@pytest.mark.integration
async def test_join_customers_and_tickets(db: SupportDatabase) -> None:
    result = await PostgresTool(db).run(
        "SELECT c.name, t.issue FROM customers c JOIN tickets t ON t.customer_id = c.id WHERE c.name ILIKE :p",
        {"p": "%jane%"},
    )
    assert [dict(r) for r in result.rows] == [{"name": "Jane Smith", "issue": "Billing question"}]


@pytest.mark.integration
async def test_empty_result_is_clean(db: SupportDatabase) -> None:
    result = await PostgresTool(db).run("SELECT * FROM tickets WHERE id = :id", {"id": 12})
    assert result.row_count == 0
    assert result.rows == ()


@pytest.mark.integration
async def test_row_cap_truncates(db: SupportDatabase) -> None:
    result = await PostgresTool(db, row_cap=2).run("SELECT * FROM customers ORDER BY id")
    assert result.row_count == 2
    assert result.truncated


# -- defence in depth: with the guard switched off, the transaction and the role still hold --------------------
@pytest.fixture
def no_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    def passthrough(query: object, params: object = None, **_: object) -> CheckedQuery:
        return CheckedQuery(sql=str(query), params=None, tables=frozenset())

    monkeypatch.setattr(postgres_tool_module, "check_sql", passthrough)


@pytest.mark.integration
@pytest.mark.usefixtures("no_guard")
@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM tickets",
        "UPDATE customers SET city = 'Paris'",
        "CREATE TABLE pwned (x int)",
        "SELECT * FROM support_messages",
        "SELECT * FROM kb_articles",
        "SELECT nextval('support_messages_id_seq')",
        "SELECT pg_read_file('/etc/passwd')",
    ],
)
async def test_without_the_guard_the_transaction_and_role_still_refuse(db: SupportDatabase, query: str) -> None:
    before = await _checksum(db)
    with pytest.raises(ToolError) as failed:
        await PostgresTool(db).run(query)
    assert failed.value.code == "database_error"
    assert await _checksum(db) == before


@pytest.mark.integration
@pytest.mark.usefixtures("no_guard")
async def test_without_the_guard_statement_timeout_still_holds(db: SupportDatabase) -> None:
    with pytest.raises(ToolError) as failed:
        await PostgresTool(db, statement_timeout_ms=50).run("SELECT pg_sleep(5)")
    assert failed.value.code == "statement_timeout"


@pytest.mark.integration
@pytest.mark.usefixtures("no_guard")
@pytest.mark.parametrize("with_role", [True, False], ids=["reader-role", "no-reader-role"])
async def test_without_the_guard_each_setting_refuses_on_its_own(
    db: SupportDatabase, monkeypatch: pytest.MonkeyPatch, with_role: bool
) -> None:
    """The transaction's layers, told apart by what PostgreSQL answers: a write a SELECT can make (a large object,
    which any role may create) is refused by read-only mode, with or without the role; the desk's own table is
    refused by the role, and only by it; a long query is cut by PostgreSQL's timeout; the search path is pinned. (A
    ``DELETE`` cannot even be written here: the checked query runs inside the bounds' wrapper, a subquery.)"""
    if not with_role:
        monkeypatch.setattr(db, "reader_role", None)
    assert db.reader_role is not None or not with_role
    before = await _checksum(db)
    tool = PostgresTool(db, statement_timeout_ms=100)
    writes = ["SELECT lo_create(0) AS made"]
    if not with_role:  # the role may not use the sequence: with it, that is refused before read-only mode is asked
        writes.append("SELECT nextval('support_messages_id_seq') AS n")
    for write in writes:
        with pytest.raises(ToolError, match="in a read-only transaction") as failed:
            await tool.run(write)
        assert failed.value.code == "database_error"
    if with_role:
        with pytest.raises(ToolError, match="permission denied for table support_messages"):
            await tool.run("SELECT content FROM support_messages")
    else:  # the read that the role refuses above is the role's doing: without it the query runs
        await tool.run("SELECT content FROM support_messages")
    with pytest.raises(ToolError) as slow:
        await tool.run("SELECT pg_sleep(5)")
    assert slow.value.code == "statement_timeout"
    cause = slow.value.__cause__  # PostgreSQL's own timeout, not the client's deadline 250 ms later
    assert isinstance(cause, psycopg.errors.QueryCanceled) and "statement timeout" in str(cause), cause
    path = await tool.run("SELECT current_setting('search_path') AS path, current_user AS who")
    assert path.rows[0]["path"] == f'pg_catalog, "{db.schema}", pg_temp'
    assert (path.rows[0]["who"] == db.reader_role) is with_role
    assert await _checksum(db) == before


def test_checked_queries_are_cached_and_refusals_are_not() -> None:
    from routegate.apps.support.sqlguard import _analyse

    query = "SELECT name FROM customers WHERE city = :city AND name LIKE '%o%'"
    first = check_sql(query, {"city": "London"})
    hits = _analyse.cache_info().hits
    again = check_sql(query, {"city": "Toronto"})
    assert _analyse.cache_info().hits == hits + 1
    assert again.sql == first.sql and "%%o%%" in again.sql  # escaped for psycopg when params are passed
    assert "'%o%'" in check_sql(query.replace(":city", "'Paris'")).sql  # not escaped without params
    for _ in range(2):
        with pytest.raises(SqlRefusedError):
            check_sql("DELETE FROM customers")
