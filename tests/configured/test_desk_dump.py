"""A desk from the file ``pg_dump`` writes: tables qualified with ``public``, ``SET`` lines, ``set_config``,
``COPY ... FROM stdin`` blocks, owners and grants. The tables land in the desk's own schema, nothing is written
elsewhere, and the desk answers as it does from the plain SQL file."""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from routegate.apps.configured.config import DeskConfigError, load_config
from routegate.apps.configured.introspect import Table, introspect, table_names
from routegate.apps.configured.loader import load_connection, scratch_load
from routegate.apps.configured.script import parse_script
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import ROOT, SHOP, desk_init

DUMP = ROOT / "tests" / "data" / "shop_pg_dump.sql"
"""``pg_dump`` 16.2 of a database made of ``examples/shop/shop.sql`` plus :data:`EXTRAS` (a sequence, a view, an
index, a comment, owners and grants), as :func:`_pg_dump` writes it."""

EXTRAS = """
CREATE SEQUENCE orders_id_seq START 1050;
ALTER SEQUENCE orders_id_seq OWNED BY orders.id;
ALTER TABLE orders ALTER COLUMN id SET DEFAULT nextval('orders_id_seq');
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
CREATE VIEW open_orders AS
    SELECT o.id, c.name, o.total FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status = 'open';
COMMENT ON TABLE orders IS 'One row per checkout; status moves open -> shipped -> delivered (or returned, cancelled).';
ALTER TABLE customers OWNER TO shop_owner;
ALTER TABLE products OWNER TO shop_owner;
ALTER TABLE orders OWNER TO shop_owner;
ALTER TABLE order_items OWNER TO shop_owner;
ALTER VIEW open_orders OWNER TO shop_owner;
GRANT SELECT ON customers, products, orders, order_items TO shop_analyst;
CREATE FUNCTION open_order_total(p_customer integer) RETURNS numeric LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(o.total), 0) FROM public.orders o WHERE o.customer_id = p_customer AND o.status = 'open';
$$;
CREATE FUNCTION audit_order() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    -- a body naming public tables, one of them made here: public.order_audit (id int); is text, not a table
    CREATE TABLE IF NOT EXISTS public.order_audit (order_id integer, seen timestamptz DEFAULT now());
    INSERT INTO public.order_audit (order_id) VALUES (NEW.id);
    IF NOT EXISTS (SELECT 1 FROM public.customers c WHERE c.id = NEW.customer_id) THEN
        RAISE EXCEPTION 'no customer % in public.customers; $$ is not the end', NEW.customer_id;
    END IF;
    RETURN NEW;
END;
$body$;
CREATE TRIGGER orders_audit AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION audit_order();
ALTER FUNCTION open_order_total(integer) OWNER TO shop_owner;
ALTER FUNCTION audit_order() OWNER TO shop_owner;
"""

QUESTIONS = {
    "What is the status of order 1042?": "Order 1042: status is open.",
    "Who placed order 1046?": "The customer of order 1046: Sofia Rossi (customer 6).",
}


def _relations(pg_url: str, schema: str) -> set[str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (schema,),
        ).fetchall()
    return {str(r[0]) for r in rows}


async def _answers(settings_: Settings, desk: Path, encoder: MiniLMEncoder) -> dict[str, str]:
    async with open_support_desk(settings_, desk, encoder=encoder) as opened:
        return {q: (await opened.ask(q, session_id=f"dump-{i}")).answer for i, q in enumerate(QUESTIONS)}


def _dump_desk(tmp_path: Path, pg_url: str, dump: Path, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
    desk = tmp_path / name
    assert desk_init(pg_url, tmp_path, str(desk), "--from-sql", str(dump)) == 0
    out = capsys.readouterr().out
    assert "left out of the SQL file: 12 owner and privileges, 2 settings" in out
    return desk


def test_a_pg_dump_file_loads_into_the_desks_own_schema(
    tmp_path: Path, pg_url: str, encoder: MiniLMEncoder, capsys: pytest.CaptureFixture[str]
) -> None:
    public_before = _relations(pg_url, "public")
    desk = _dump_desk(tmp_path, pg_url, DUMP, "dumped", capsys)
    config = load_config(desk)
    assert {"customers", "orders", "order_items", "products"} <= {t.name for t in config.tables}
    assert config.table("orders").primary_key == "id"
    assert {(fk.column, fk.references) for fk in config.table("orders").foreign_keys} == {("customer_id", "customers")}

    answers = asyncio.run(_answers(Settings(database_url=pg_url, data_dir=tmp_path), desk, encoder))

    assert answers == QUESTIONS  # as from the plain file (tests/configured/test_desk_shop.py)
    loaded = _relations(pg_url, "desk_dumped")
    assert {"customers", "orders", "order_items", "products", "open_orders", "orders_id_seq"} <= loaded
    assert _relations(pg_url, "public") == public_before  # nothing of the dump went to public
    with psycopg.connect(pg_url) as conn:  # the sequence, its default and the view came along, in the desk's schema
        assert conn.execute("SELECT nextval('desk_dumped.orders_id_seq')").fetchone() == (1050,)
        default = conn.execute(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d WHERE d.adrelid = 'desk_dumped.orders'::regclass"
        ).fetchone()
        assert default is not None and "desk_dumped.orders_id_seq" in str(default[0])
        assert conn.execute("SELECT count(*) FROM desk_dumped.open_orders").fetchone() == (3,)


def _introspected(pg_url: str, text: str, source: str) -> tuple[list[Table], int]:
    """The tables ``desk init`` reads from ``text`` loaded into a scratch schema, and its statements' count."""
    with load_connection(pg_url) as conn, scratch_load(conn, text, source=source) as (schema, script):
        tables = introspect(conn, schema, table_names(conn, schema))
    return tables, len(script.statements)


_ROUTINES = re.compile(r"^CREATE (FUNCTION|TRIGGER) .*?;\n\n\n?|^ALTER FUNCTION .*?;\n", re.MULTILINE | re.DOTALL)


def test_function_bodies_naming_public_are_neither_tables_nor_a_failure(pg_url: str) -> None:
    """pg_dump writes a function's body dollar-quoted and as it was written: its ``public.orders``, a ``;``, even a
    ``CREATE TABLE public.order_audit`` inside are the body's text, run as written, never a table of the desk."""
    text = DUMP.read_text(encoding="utf-8")
    assert "AS $_$" in text and "CREATE TABLE IF NOT EXISTS public.order_audit" in text  # the fixture has them
    without = _ROUTINES.sub("", text)
    assert "CREATE FUNCTION" not in without and "CREATE TRIGGER" not in without and "OWNER TO shop_owner;" in without

    with_routines, statements = _introspected(pg_url, text, str(DUMP))
    plain, plain_statements = _introspected(pg_url, without, "without-routines.sql")

    assert statements == plain_statements + 3  # two functions and a trigger, each one statement
    assert with_routines == plain  # names, columns, types, keys, row counts, filter values, sample rows
    # a file that does not turn the check of function bodies off (pg_dump's does) loads the same
    unchecked, _ = _introspected(pg_url, text.replace("SET check_function_bodies = false;\n", ""), "unchecked.sql")
    assert unchecked == plain
    assert [t.name for t in plain] == ["customers", "open_orders", "order_items", "orders", "products"]


def _pg_dump() -> Path:
    pgserver = pytest.importorskip("pgserver")
    binary = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"
    if not binary.is_file():
        pytest.skip("the pgserver package ships no pg_dump here")
    return binary


@pytest.fixture
def source_database(pg_url: str) -> Iterator[str]:
    """A database like a shop's: the tables in public, owned by a role, with a sequence, a view and grants."""
    name = f"shop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
        for role in ("shop_owner", "shop_analyst"):
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                conn.execute(f"CREATE ROLE {role} NOLOGIN")
    info = conninfo_to_dict(pg_url)
    info["dbname"] = name
    url = make_conninfo(**info)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute((SHOP / "shop.sql").read_bytes())
        conn.execute(EXTRAS.encode())
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_dump_pg_dump_writes_now_loads(
    tmp_path: Path,
    pg_url: str,
    source_database: str,
    encoder: MiniLMEncoder,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dump = tmp_path / "shop.sql"
    written = subprocess.run(
        [str(_pg_dump()), "--dbname", source_database], check=True, capture_output=True, text=True, timeout=60
    )
    dump.write_text(written.stdout, encoding="utf-8")
    assert "COPY public.orders" in written.stdout and "OWNER TO shop_owner" in written.stdout
    desk = _dump_desk(tmp_path, pg_url, dump, "live", capsys)
    answers = asyncio.run(_answers(Settings(database_url=pg_url, data_dir=tmp_path), desk, encoder))
    assert answers == QUESTIONS


@pytest.mark.parametrize("archive", ["custom", "tar"])
def test_a_pg_dump_archive_is_refused_with_what_to_do(
    tmp_path: Path, pg_url: str, source_database: str, capsys: pytest.CaptureFixture[str], archive: str
) -> None:
    dump = tmp_path / "shop.dump"
    subprocess.run(
        [str(_pg_dump()), "-F", archive, "-f", str(dump), "--dbname", source_database], check=True, timeout=60
    )
    assert desk_init(pg_url, tmp_path, str(tmp_path / "desk"), "--from-sql", str(dump)) == 2
    err = capsys.readouterr().err
    assert f"--from-sql {dump}: this is a pg_dump archive (custom or tar format), not SQL" in err
    assert "pg_restore --no-owner -f FILE.sql ARCHIVE" in err
    assert not (tmp_path / "desk").exists()


def test_loading_leaks_no_setting_to_the_connection(pg_url: str) -> None:
    with load_connection(pg_url) as conn:
        before = {name: conn.execute(f"SHOW {name}").fetchone() for name in ("row_security", "search_path")}
        with scratch_load(conn, DUMP.read_text(encoding="utf-8"), source=str(DUMP)) as (_, script):
            pass
        after = {name: conn.execute(f"SHOW {name}").fetchone() for name in ("row_security", "search_path")}
    assert after == before
    assert len([s for s in script.statements if s.copy_rows is not None]) == 4


def test_a_refused_row_names_the_line_and_leaves_nothing(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.sql"
    text = DUMP.read_text(encoding="utf-8").replace("1042\t1\topen", "1042\tone\topen")
    bad.write_text(text, encoding="utf-8")
    line = 1 + text[: text.index("COPY public.orders")].count("\n")
    assert desk_init(pg_url, tmp_path, str(tmp_path / "desk"), "--from-sql", str(bad)) == 2
    err = capsys.readouterr().err
    assert f"{bad}: PostgreSQL refused the SQL file at line {line} (" in err
    assert 'invalid input syntax for type integer: "one"' in err
    assert not (tmp_path / "desk").exists()


def test_psql_commands_pg_dump_writes_are_skipped_others_refused() -> None:
    newer = "\\restrict AbC123\nSET transaction_timeout = 0;\nCREATE TABLE public.t (id int);\n\\unrestrict AbC123\n"
    script = parse_script(newer, source="new.sql", known_settings=["statement_timeout"])
    assert [s.sql for s in script.statements] == ["CREATE TABLE t (id int)"]
    assert script.skipped == {"psql \\restrict lines": 2, "settings": 1}
    with pytest.raises(DeskConfigError, match=r"all\.sql line 3: \\connect is a psql command"):
        parse_script("-- pg_dumpall\n\n\\connect shop\nCREATE TABLE t (id int);\n", source="all.sql")
    with pytest.raises(DeskConfigError, match=r"cut\.sql line 1: the rows of COPY \.\.\. FROM stdin have no end"):
        parse_script("COPY public.t (id) FROM stdin;\n1\n2\n", source="cut.sql")


def test_only_names_are_moved_never_text() -> None:
    text = (
        "CREATE TABLE public.notes (id int DEFAULT nextval('public.notes_id_seq'::regclass), body text);\n"
        "INSERT INTO public.notes (body) VALUES ('see public.notes; -- not a comment');\n"
        "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$ SELECT count(*) FROM public.notes; $$;\n"
        "ALTER TABLE public.notes RENAME COLUMN owner TO keeper;\n"
        'COPY "public"."notes" (body) FROM stdin;\nit\'s; public.x\n\\.\n'
        "SELECT pg_catalog.set_config('search_path', '', false);\nSELECT pg_catalog.set_config('app.x', 'y', false);\n"
    )
    script = parse_script(text, source="t.sql")
    assert [(s.sql, s.line) for s in script.statements] == [
        ("CREATE TABLE notes (id int DEFAULT nextval('notes_id_seq'::regclass), body text)", 1),
        ("INSERT INTO notes (body) VALUES ('see public.notes; -- not a comment')", 2),
        ("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT count(*) FROM public.notes; $$", 3),
        ("ALTER TABLE notes RENAME COLUMN owner TO keeper", 4),
        ('COPY "notes" (body) FROM stdin', 5),
        ("SELECT pg_catalog.set_config('app.x', 'y', true)", 9),
    ]
    assert script.statements[4].copy_rows == "it's; public.x\n"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_a_string_literal_comes_through_unchanged(value: str) -> None:
    literal = "'" + value.replace("'", "''") + "'"
    script = parse_script(f"INSERT INTO public.t VALUES ({literal});\nSELECT 1;\n", source="p.sql")
    assert [s.sql for s in script.statements] == [f"INSERT INTO t VALUES ({literal})", "SELECT 1"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_statements_or_a_desk_error(text: str) -> None:
    try:
        parse_script(text, source="any.sql")
    except DeskConfigError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("any.sql")


def test_a_schema_the_file_creates_is_moved_too_and_others_are_kept() -> None:
    text = (
        "CREATE SCHEMA sales;\nALTER SCHEMA sales OWNER TO shop_owner;\nCREATE TABLE sales.orders (id int);\n"
        "SELECT pg_catalog.count(*) FROM sales.orders JOIN extensions.thing ON true;\nDROP TABLE IF EXISTS orders;\n"
        "BEGIN;\nSET TIME ZONE 'UTC';\nCOMMIT;\n"
    )
    script = parse_script(text, source="s.sql", known_settings=["timezone"])
    assert [s.sql for s in script.statements] == [
        "CREATE TABLE orders (id int)",
        "SELECT pg_catalog.count(*) FROM orders JOIN extensions.thing ON true",
        "SET LOCAL TIME ZONE 'UTC'",
    ]
    assert script.skipped == {
        "schema statements": 1,  # CREATE SCHEMA (its ALTER ... OWNER TO counts as an owner statement)
        "DROP statements": 1,
        "transaction statements": 2,
        "owner and privileges": 1,
    }


COPY_KINDS = r"""CREATE TABLE public.things (id integer NOT NULL, name character varying(8));
ALTER TABLE public.things ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME public.things_id_seq);
CREATE DOMAIN public.positive AS integer CHECK (VALUE > 0);
CREATE TABLE public.kinds (id public.positive, tags text[], blob bytea, at date, "Mixed" numeric(6,2),
    doubled integer GENERATED ALWAYS AS (id * 2) STORED);
COPY public.things (id, name) FROM stdin;
5	five
6	\N
\.
COPY public.kinds FROM stdin;
1	{a,"b c"}	\\x0102	2024-02-29	3.14159
\.
COPY public.kinds (id, "Mixed", tags) FROM stdin WITH (FORMAT csv, HEADER true);
id,Mixed,tags
2,"1.5",{x}
\.
"""


def test_copy_rows_arrive_as_copy_would_put_them(pg_url: str) -> None:
    """The rows of ``COPY ... FROM stdin`` go through a staging table and an insert as the desk's owner role: the
    values are the ones COPY itself stores (identity columns as given, arrays, bytea, dates, domains, a typmod's
    rounding, NULLs, a generated column, CSV with a header)."""
    with load_connection(pg_url) as conn, scratch_load(conn, COPY_KINDS, source="kinds.sql") as (schema, _):
        things = conn.execute(f"SELECT id, name FROM {schema}.things ORDER BY id").fetchall()
        kinds = conn.execute(
            f'SELECT id, tags, blob, at::text, "Mixed"::text, doubled FROM {schema}.kinds ORDER BY id'
        ).fetchall()
    assert things == [(5, "five"), (6, None)]
    assert kinds == [(1, ["a", "b c"], b"\x01\x02", "2024-02-29", "3.14", 2), (2, ["x"], None, None, "1.50", 4)]


def test_copy_rows_a_column_refuses_are_named_with_the_copy_line(pg_url: str) -> None:
    text = "CREATE TABLE public.t (name character varying(3));\nCOPY public.t (name) FROM stdin;\ntoo long\n\\.\n"
    with (
        load_connection(pg_url) as conn,
        pytest.raises(DeskConfigError) as refused,
        scratch_load(conn, text, source="long.sql"),
    ):
        pass
    message = "long.sql: PostgreSQL refused the SQL file at line 2 (value too long for type character varying(3))"
    assert message in str(refused.value)
