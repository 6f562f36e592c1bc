"""The SQL guard against an adversarial corpus (``sql_corpus.py``), checked from outside, on the real PostgreSQL.

Every statement goes through the public path, ``PostgresTool.run``. It must be refused, or run reading only the
allowed tables: what it read is taken from PostgreSQL's own plan (``EXPLAIN (VERBOSE, FORMAT JSON)``: every
scanned relation with its schema, every function scan), what it returned must hold none of the planted secrets,
and a checksum of the database (every row of every user table in every schema, sequences, roles, role settings,
large objects) must be the same before and after.

Two modes: the normal one, with the restricted reader role; and a login that may not create roles (a
NOCREATEROLE, non-superuser role owning the desk's schema, as on a managed PostgreSQL) — there the guard is the
only layer between the tool and the catalogs and the desk's own tables, and it must hold alone.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from psycopg.conninfo import make_conninfo

from routegate.apps.support import postgres_tool as postgres_tool_module
from routegate.apps.support.db import READER_ROLE, SupportDatabase
from routegate.apps.support.errors import ToolError
from routegate.apps.support.postgres_tool import PostgresTool, SqlResult
from routegate.apps.support.sqlguard import ALLOWED_COLUMNS, ALLOWED_TABLES, CheckedQuery, SqlRefusedError, check_sql
from routegate.embed import MiniLMEncoder
from support.sql_corpus import ATTRIBUTE_FUNCTIONS, SECRET_RELATIONS, Entry, corpus

CORPUS = corpus()
# any of these in a result means something other than customers / tickets was read
_SECRET = f"SECRET-{uuid.uuid4().hex[:8]}"
_CANARY = f"CANARY-{uuid.uuid4().hex[:8]}"
_FORBIDDEN_IN_PLAN = re.compile(
    r"\b(pg_\w+|current_setting|set_config|version|lo_\w+|dblink\w*|nextval|setval|query_to_xml|"
    r"current_user|session_user|current_role|system_user|current_schema|current_database)\(|"
    r"\b(CURRENT_USER|SESSION_USER|CURRENT_ROLE|SYSTEM_USER)\b"
)


@dataclass(frozen=True, slots=True)
class Desk:
    db: SupportDatabase
    admin_url: str  # the superuser: for the checksum and EXPLAIN, never for the statements under test
    canary: str  # a schema holding a table named customers that must never be read
    login: str  # the role the desk connects as


def test_the_corpus_is_large_and_covers_every_kind() -> None:
    assert len(CORPUS) >= 200
    assert {expect for _, _, expect in CORPUS} == {"refuse", "accept", "safe"}
    assert sum(expect == "accept" for _, _, expect in CORPUS) >= 40  # the guard is not refusing everything
    text = "\n".join(q for q, _, _ in CORPUS)
    for needle in ("WITH RECURSIVE", "pg_sleep", "pg_read_file", "lo_import", "dblink", "set_config", "PROGRAM"):
        assert needle in text, needle
    for needle in ("INTO", "FOR UPDATE", "DO $$", "CALL", "$$", "E'", "U&", "information_schema", "/*", ";"):
        assert needle in text, needle


# -- fixtures: the two modes --------------------------------------------------------------------------------
async def _admin(url: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(url, autocommit=True)


@pytest.fixture
async def canary(pg_url: str) -> AsyncIterator[str]:
    name = f"canary_{uuid.uuid4().hex[:10]}"
    async with await _admin(pg_url) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        await conn.execute(
            sql.SQL("CREATE TABLE {}.customers (id int, name text, city text)").format(sql.Identifier(name))
        )
        await conn.execute(
            sql.SQL("INSERT INTO {}.customers VALUES (1, %s, %s)").format(sql.Identifier(name)), (_CANARY, _CANARY)
        )
    yield name
    async with await _admin(pg_url) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


async def _plant_secret(admin_url: str, schema: str) -> None:
    async with await _admin(admin_url) as conn:
        await conn.execute(
            sql.SQL("INSERT INTO {}.support_messages (session_id, role, content) VALUES ('victim', 'user', %s)").format(
                sql.Identifier(schema)
            ),
            (_SECRET,),
        )
        await conn.execute(  # the knowledge base's tables, as a desk's start makes them, with a secret chunk
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.kb_chunks (id bigserial PRIMARY KEY, source text NOT NULL, chunk integer "
                "NOT NULL, heading text NOT NULL, content text NOT NULL, embedding vector(3) NOT NULL)"
            ).format(sql.Identifier(schema))
        )
        await conn.execute(
            sql.SQL(
                "INSERT INTO {}.kb_chunks (source, chunk, heading, content, embedding) VALUES ('docs/a.md', 0, 'A', %s, "
                "'[1,2,3]')"
            ).format(sql.Identifier(schema)),
            (_SECRET,),
        )


@pytest.fixture
async def with_reader_role(db: SupportDatabase, pg_url: str, canary: str) -> Desk:
    assert db.reader_role == READER_ROLE
    await _plant_secret(pg_url, db.schema)
    login = str(psycopg.conninfo.conninfo_to_dict(pg_url).get("user") or "postgres")
    return Desk(db=db, admin_url=pg_url, canary=canary, login=login)


@pytest.fixture
def limited_login(pg_url: str) -> Iterator[tuple[str, str, str]]:
    """A NOCREATEROLE, non-superuser login owning a fresh schema: (its URL, its name, the schema)."""
    login, schema = f"limited_{uuid.uuid4().hex[:10]}", f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB").format(sql.Identifier(login)))
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(schema), sql.Identifier(login)))
        # as a managed PostgreSQL's admin login: it may create schemas (and run CREATE EXTENSION IF NOT EXISTS)
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(str(conn.info.dbname)), sql.Identifier(login)
            )
        )
    yield make_conninfo(pg_url, user=login), login, schema
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(login)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(login)))


@pytest.fixture
async def without_reader_role(
    limited_login: tuple[str, str, str], pg_url: str, canary: str, encoder: MiniLMEncoder
) -> AsyncIterator[Desk]:
    url, login, schema = limited_login
    database = SupportDatabase(url, schema=schema, max_size=2)
    await database.open()
    try:
        await database.ensure_schema()
        assert database.reader_role is None
        await _plant_secret(pg_url, schema)
        yield Desk(db=database, admin_url=pg_url, canary=canary, login=login)
    finally:
        await database.close()


@pytest.fixture(params=["reader_role", "no_reader_role"])
def desk(request: pytest.FixtureRequest) -> Desk:
    name = "with_reader_role" if request.param == "reader_role" else "without_reader_role"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]  # pytest's API is untyped


# -- what the database holds, and what a statement reads ----------------------------------------------------
async def _checksum(admin_url: str) -> str:
    """Every row of every user table and sequence in every schema, the relations, roles, role settings and
    large objects — read as the superuser."""
    parts: list[str] = []
    async with await _admin(admin_url) as conn:
        rels = await (
            await conn.execute(
                "SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
                " AND n.nspname NOT LIKE 'pg_temp%%' AND c.relkind IN ('r', 'S', 'v', 'm', 'f', 'p')"
                " ORDER BY 1, 2"
            )
        ).fetchall()
        for schema, name, kind in rels:
            ident = sql.Identifier(schema, name)
            query = (
                sql.SQL("SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {} x")
                if kind in ("r", "p")
                else sql.SQL("SELECT last_value::text FROM {}")
                if kind == "S"
                else sql.SQL("SELECT 'view'")
            )
            row = await (await conn.execute(query.format(ident))).fetchone()
            parts.append(f"{schema}.{name}:{kind}={row[0] if row else ''}")
        for query in (
            "SELECT string_agg(concat_ws(':', rolname, rolsuper, rolcreaterole, rolcanlogin, rolbypassrls),"
            " ',' ORDER BY rolname) FROM pg_roles",
            "SELECT string_agg(setconfig::text, ',' ORDER BY setconfig::text) FROM pg_db_role_setting",
            "SELECT count(*) FROM pg_largeobject_metadata",
            "SELECT string_agg(extname, ',' ORDER BY extname) FROM pg_extension",
            "SELECT string_agg(proname, ',' ORDER BY proname) FROM pg_proc WHERE pronamespace <> 'pg_catalog'::regnamespace"
            " AND pronamespace <> 'information_schema'::regnamespace",
        ):
            row = await (await conn.execute(query)).fetchone()
            parts.append(str(row[0] if row else None))
    return "\n".join(parts)


def _walk_plan(node: object, relations: set[tuple[str, str]], functions: list[str], text: list[str]) -> None:
    if isinstance(node, dict):
        if "Relation Name" in node:
            relations.add((str(node.get("Schema")), str(node["Relation Name"])))
        if node.get("Node Type") in ("Function Scan", "Table Function Scan", "Foreign Scan", "Custom Scan"):
            functions.append(str(node.get("Function Name") or node.get("Node Type")))
        for value in node.values():
            _walk_plan(value, relations, functions, text)
    elif isinstance(node, list):
        for item in node:
            _walk_plan(item, relations, functions, text)
    elif isinstance(node, str):
        text.append(node)


async def _planned_reads(desk: Desk, checked: CheckedQuery) -> tuple[set[tuple[str, str]], list[str], str] | None:
    """What PostgreSQL's plan of the statement the tool ran reads; ``None`` if PostgreSQL rejects the statement."""
    async with await _admin(desk.admin_url) as conn:
        await conn.execute(sql.SQL("SET search_path = pg_catalog, {}, pg_temp").format(sql.Identifier(desk.db.schema)))
        cur = psycopg.AsyncClientCursor(conn)  # binds the params client-side: EXPLAIN takes no server params
        try:
            await cur.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + checked.sql, checked.params)
        except psycopg.Error:
            return None
        row = await cur.fetchone()
    assert row is not None
    plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    relations: set[tuple[str, str]] = set()
    functions: list[str] = []
    text: list[str] = []
    _walk_plan(plan, relations, functions, text)
    return relations, functions, "\n".join(text)


def _prepare(entry: Entry, desk: Desk) -> tuple[str, dict[str, Any] | None, str]:
    query, params, expect = entry
    return query.replace("{schema}", desk.db.schema).replace("{canary}", desk.canary), params, expect


# -- the corpus, in both modes ------------------------------------------------------------------------------
@pytest.mark.integration
async def test_every_corpus_statement_is_refused_or_reads_only_allowed_tables(desk: Desk) -> None:
    tool = PostgresTool(desk.db, statement_timeout_ms=500)
    allowed = {(desk.db.schema, t) for t in ALLOWED_TABLES}
    before = await _checksum(desk.admin_url)
    problems: list[str] = []
    ran = 0
    for entry in CORPUS:
        query, params, expect = _prepare(entry, desk)
        try:
            result: SqlResult | ToolError = await tool.run(query, params)
        except SqlRefusedError as refused:
            if not str(refused).startswith(f"query refused ({refused.code}): "):
                problems.append(f"refusal without its code: {query!r}: {refused}")
            if expect == "accept":
                problems.append(f"refused but should run: {query!r}: {refused}")
            continue
        except ToolError as failed:
            result = failed
        ran += 1
        if expect == "refuse":
            problems.append(f"ran but must be refused: {query!r}")
        if expect == "accept" and isinstance(result, ToolError):
            problems.append(f"should run but failed: {query!r}: {result}")
        checked = check_sql(query, params, tables=desk.db.readable_tables, schema=desk.db.schema)
        planned = await _planned_reads(desk, checked)
        if planned is None:
            if not isinstance(result, ToolError):
                problems.append(f"ran although PostgreSQL cannot plan it: {query!r}")
            continue
        relations, functions, text = planned
        if not relations <= allowed:
            problems.append(f"reads {sorted(relations - allowed)}: {query!r}")
        if functions:
            problems.append(f"scans functions {functions}: {query!r}")
        if found := _FORBIDDEN_IN_PLAN.search(text):
            problems.append(f"calls {found.group(0)!r}: {query!r}")
        if isinstance(result, SqlResult):
            shown = repr(result.to_dict())
            for secret in (_SECRET, _CANARY, desk.login, READER_ROLE):
                if secret in shown:
                    problems.append(f"returned {secret!r}: {query!r}")
    assert not problems, "\n".join(problems)
    assert ran >= 40
    assert await _checksum(desk.admin_url) == before


# -- the exploits, named ----------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("relation", SECRET_RELATIONS)
async def test_a_cte_named_like_a_relation_does_not_hide_its_body(desk: Desk, relation: str) -> None:
    name = relation.split(".")[-1]
    with pytest.raises(SqlRefusedError) as refused:
        await PostgresTool(desk.db).run(f"WITH {name} AS (SELECT * FROM {relation}) SELECT * FROM {name}")
    assert refused.value.code == "table_not_allowed"
    assert relation.split(".")[0] in str(refused.value)


@pytest.mark.integration
@pytest.mark.parametrize("query", ["SELECT user FROM customers", "SELECT current_role FROM customers"])
async def test_keywords_that_return_the_role_are_refused(desk: Desk, query: str) -> None:
    with pytest.raises(SqlRefusedError) as refused:
        await PostgresTool(desk.db).run(query)
    assert refused.value.code == "function_not_allowed"


@pytest.mark.integration
async def test_without_the_reader_role_the_guard_is_the_only_layer(without_reader_role: Desk) -> None:
    """The mode is real: as the limited login, the exploit reads the desk's chat memory when nothing stops it."""
    exploit = "WITH support_messages AS (SELECT * FROM support_messages) SELECT content FROM support_messages"
    async with without_reader_role.db.connection() as conn:
        rows = await (await conn.execute(exploit)).fetchall()
    assert {"content": _SECRET} in rows
    with pytest.raises(SqlRefusedError):
        await PostgresTool(without_reader_role.db).run(exploit)


@pytest.mark.integration
async def test_without_the_reader_role_the_desk_warns_once_naming_the_missing_layer(
    limited_login: tuple[str, str, str], caplog: pytest.LogCaptureFixture, encoder: MiniLMEncoder
) -> None:
    url, _, schema = limited_login
    with caplog.at_level(logging.WARNING, logger="routegate.apps.support.db"):
        async with SupportDatabase(url, schema=schema) as database:
            await database.ensure_schema()
            await database.ensure_schema()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert READER_ROLE in warnings[0] and "reader-role layer" in warnings[0]


@pytest.mark.integration
async def test_the_tool_pins_search_path_to_the_desk_schema(with_reader_role: Desk) -> None:
    """A table named ``customers`` in ``public`` is never what an unqualified ``customers`` means."""
    async with await _admin(with_reader_role.admin_url) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS public.customers (id int, name text, city text)")
        await conn.execute("INSERT INTO public.customers VALUES (99, %s, %s)", (_CANARY, _CANARY))
    try:
        result = await PostgresTool(with_reader_role.db).run("SELECT name FROM customers ORDER BY id")
        assert _CANARY not in repr(result.to_dict())
        assert result.row_count == 3
    finally:
        async with await _admin(with_reader_role.admin_url) as conn:
            await conn.execute("DROP TABLE public.customers")


@pytest.mark.integration
@pytest.mark.parametrize("function", ATTRIBUTE_FUNCTIONS)
@pytest.mark.parametrize("form", ["SELECT c.{f} FROM customers c", 'SELECT c."{f}" FROM customers c'])
async def test_attribute_notation_cannot_call_a_function(desk: Desk, function: str, form: str) -> None:
    with pytest.raises(SqlRefusedError) as refused:
        await PostgresTool(desk.db).run(form.format(f=function))
    assert refused.value.code == "unknown_column"
    assert function in str(refused.value)


@pytest.mark.integration
async def test_without_the_column_check_attribute_notation_calls_the_function(
    with_reader_role: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exploit is real: what the guard renders for ``c.row_to_json``, run as the tool runs it, is a call of
    ``row_to_json(c)`` — a function that is not on the allowlist."""
    rendered = 'SELECT "c"."row_to_json" FROM "customers" AS "c" ORDER BY "c"."id" LIMIT 1'

    def passthrough(query: object, params: object = None, **_: object) -> CheckedQuery:
        return CheckedQuery(sql=rendered, params=None, tables=frozenset({"customers"}))

    monkeypatch.setattr(postgres_tool_module, "check_sql", passthrough)
    result = await PostgresTool(with_reader_role.db).run("ignored")
    assert result.rows[0]["row_to_json"] == {"id": 1, "name": "John Doe", "city": "New York"}


@pytest.mark.integration
async def test_the_guards_default_columns_are_the_desk_tables_columns(db: SupportDatabase) -> None:
    async with db.connection() as conn:
        for table, columns in ALLOWED_COLUMNS.items():
            cursor = await conn.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(sql.Identifier(table)))
            assert tuple(c.name for c in cursor.description or ()) == columns


_COLUMNS = {name for cols in ALLOWED_COLUMNS.values() for name in cols}
_IDENTIFIER = st.from_regex(r"[a-z_][a-z0-9_$]{0,30}", fullmatch=True) | st.text(
    st.characters(codec="utf-8", exclude_characters='"%\\', exclude_categories=("Cc", "Cs", "Zl", "Zp")),
    min_size=1,
    max_size=20,
).map(lambda name: f'"{name}"')
_PLACES = [
    "SELECT c.{i} FROM customers c",
    "SELECT c.name FROM customers c WHERE c.{i} IS NOT NULL",
    "SELECT c.name FROM customers c ORDER BY c.{i}",
    "SELECT t.id FROM tickets t JOIN customers c ON c.id = t.customer_id AND c.{i} IS NULL",
    "SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM tickets t WHERE t.{i} = c.id)",
    "SELECT q.{i} FROM (SELECT * FROM customers) AS q",
    "WITH w AS (SELECT id, name FROM tickets t, customers c WHERE c.id = t.customer_id) SELECT w.{i} FROM w",
]


@settings(max_examples=300, deadline=None)
@given(_IDENTIFIER, st.sampled_from(_PLACES))
def test_a_reference_to_no_real_column_is_refused(identifier: str, place: str) -> None:
    """For any identifier that is not a column of the table it qualifies, ``alias.<identifier>`` is refused."""
    if identifier.strip('"') in _COLUMNS:
        return
    with pytest.raises(SqlRefusedError):
        check_sql(place.format(i=identifier), schema="support")


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(sorted(ALLOWED_COLUMNS["customers"])), st.booleans())
def test_a_reference_to_a_real_column_runs(column: str, quoted: bool) -> None:
    name = f'"{column}"' if quoted else column
    assert check_sql(f"SELECT c.{name} FROM customers c ORDER BY c.{name}").tables == {"customers"}


# -- defence in depth: with the guard switched off, the reader role and the transaction still hold -------------
@pytest.mark.integration
async def test_without_the_guard_the_reader_role_still_refuses_the_catalog_trick(
    with_reader_role: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    def passthrough(query: object, params: object = None, **_: object) -> CheckedQuery:
        return CheckedQuery(sql=str(query), params=None, tables=frozenset())

    monkeypatch.setattr(postgres_tool_module, "check_sql", passthrough)
    tool = PostgresTool(with_reader_role.db)
    for query in (
        "WITH support_messages AS (SELECT * FROM support_messages) SELECT * FROM support_messages",
        f"SELECT * FROM {with_reader_role.canary}.customers",
    ):
        with pytest.raises(ToolError) as failed:
            await tool.run(query)
        assert "permission denied" in str(failed.value)


# -- hypothesis: SQL-ish text never makes the guard raise anything but its refusal -----------------------------
_TOKENS = [
    "SELECT", "FROM", "WHERE", "WITH", "RECURSIVE", "AS", "UNION", "ALL", "(", ")", ",", ";", "*", "customers",
    "tickets", "pg_user", "pg_catalog.pg_roles", "support_messages", "a", "b", "id", "name", "count(*)", "'x'",
    "$$", "$x$", "E'", '"', "--", "/*", "*/", "1", "=", "<>", "::", "regclass", "FOR", "UPDATE", "INTO", "JOIN",
    "ON", "LATERAL", "DO", "COPY", "PROGRAM", "pg_sleep(1)", "current_user", "user", "\\", ":p", "%(p)s", "%",
    "?", "$1", "\n", "U&", "ORDER BY", "LIMIT", "GROUP BY", "HAVING", "CASE", "WHEN", "THEN", "END", "NOT",
    "IN", "EXISTS", "VALUES", "TABLE", "lower(", "CAST(", "text", "::int", "ONLY", "DISTINCT", "ON", "'",
    "INTERVAL", "'1 day'", "EXTRACT(", "YEAR", "NULL", "TRUE", "\u212a", "\u00a0", "ｓｅｌｅｃｔ",
]  # fmt: skip
_SQLISH = st.lists(st.sampled_from(_TOKENS) | st.text(max_size=6), max_size=40).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(_SQLISH, st.sampled_from([None, {"p": "x"}, {"p": 1, "q": None}]))
def test_sqlish_text_is_refused_or_reads_only_allowed_tables(text: str, params: dict[str, Any] | None) -> None:
    try:
        checked = check_sql(text, params, schema="support")
    except SqlRefusedError as refused:
        refusal = str(refused)
    else:
        refusal = ""
    if refusal:
        assert refusal.startswith("query refused (")
        return
    assert checked.tables <= ALLOWED_TABLES
    # what runs is itself a query the guard accepts, reading the same tables
    again = check_sql(checked.sql.replace("%(p)s", ":p").replace("%%", "%"), params, schema="support")
    assert again.tables == checked.tables


@pytest.mark.integration
async def test_an_administrator_can_restore_the_reader_role_for_a_limited_login(
    limited_login: tuple[str, str, str], pg_url: str, encoder: MiniLMEncoder
) -> None:
    url, login, schema = limited_login
    with psycopg.connect(pg_url, autocommit=True) as conn:  # what the security doc tells the administrator to run
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER_ROLE,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOINHERIT").format(sql.Identifier(READER_ROLE)))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(READER_ROLE), sql.Identifier(login)))
    async with SupportDatabase(url, schema=schema) as database:
        await database.ensure_schema()
        assert database.reader_role == READER_ROLE
        assert (await PostgresTool(database).run("SELECT id FROM customers")).row_count == 3
