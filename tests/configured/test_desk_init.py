"""``routegate desk init`` from outside: what it writes, what it prints, and that bad input leaves nothing behind."""

from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

import psycopg
import pytest

from routegate.apps.configured.config import load_config
from routegate.cli import main

from .conftest import SHOP, desk_init


def test_init_writes_a_readable_config_and_prints_what_it_found(
    shop_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(shop_dir)
    data = tomllib.loads((shop_dir / "desk.toml").read_text(encoding="utf-8"))
    assert data["database"] == {"source": "sql", "sql_file": "shop.sql", "schema": "desk_shop"}  # copied in
    assert (shop_dir / "shop.sql").read_bytes() == (SHOP / "shop.sql").read_bytes()
    assert data["knowledge"]["paths"] == ["docs"] and (shop_dir / "docs" / "returns.md").is_file()
    assert {t.name for t in config.tables} == {"customers", "orders", "order_items", "products"}
    customers = config.table("customers")
    assert "password_hash" not in customers.columns  # a secret-looking column is left out
    assert customers.name_column == "name" and customers.primary_key == "id"
    orders = config.table("orders")
    assert [(fk.column, fk.references) for fk in orders.foreign_keys] == [("customer_id", "customers")]
    assert orders.filters["status"] == ["cancelled", "delivered", "open", "returned", "shipped"]
    routes = {r.name: r for r in config.routes}
    assert routes["orders"].tables == ["orders", "order_items"]  # one route per table family
    assert routes["knowledge"].kind == "kb" and routes["chat"].kind == "llm"
    assert all(len(r.examples) >= 8 for r in config.routes)
    assert any("1040" in e for e in routes["orders"].examples)  # examples from the real rows
    assert "# One [[tables]] per readable table" in (shop_dir / "desk.toml").read_text(encoding="utf-8")


def test_init_prints_the_summary(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        desk_init(
            pg_url, tmp_path, str(tmp_path / "s"), "--from-sql", str(SHOP / "shop.sql"), "--kb", str(SHOP / "docs")
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "orders (10 rows; primary key id; customer_id -> customers.id)" in out
    assert "left out as private (add them to `columns` to allow): customers.password_hash" in out
    assert "docs/warranty.html: Warranty" in out
    assert "every other table and column is denied" in out


def test_tables_limits_what_the_desk_may_read(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "small"
    assert (
        desk_init(pg_url, tmp_path, str(target), "--from-sql", str(SHOP / "shop.sql"), "--tables", "customers,orders")
        == 0
    )
    config = load_config(target)
    assert [t.name for t in config.tables] == ["customers", "orders"]
    assert not any(r.kind == "kb" for r in config.routes)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--tables", "customers,invoices"], "--tables: invoices not found in"),
        (["--kb", "/nonexistent-docs"], "--kb /nonexistent-docs: no such folder or file"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_left(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    target = tmp_path / "desk"
    assert desk_init(pg_url, tmp_path, str(target), "--from-sql", str(SHOP / "shop.sql"), *args) == 2
    assert expected in capsys.readouterr().err
    assert not target.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".desk")]


def test_sql_postgres_refuses_is_named_and_rolled_back(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE a (id int PRIMARY KEY);\nINSERT INTO a VALUES ('not a number');\n", encoding="utf-8")
    assert desk_init(pg_url, tmp_path, str(tmp_path / "desk"), "--from-sql", str(bad)) == 2
    err = capsys.readouterr().err
    assert f"{bad}: PostgreSQL refused the SQL file" in err and "invalid input syntax for type integer" in err
    assert not (tmp_path / "desk").exists()
    with psycopg.connect(pg_url) as conn:  # the scratch schema went with the failed transaction
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'routegate_init_%'").fetchall()
    assert left == []


def test_init_never_overwrites_a_desk(shop_dir: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = (shop_dir / "desk.toml").read_bytes()
    assert desk_init(pg_url, shop_dir.parent, str(shop_dir), "--from-sql", str(SHOP / "shop.sql")) == 2
    assert "exists and is not an empty directory" in capsys.readouterr().err
    assert (shop_dir / "desk.toml").read_bytes() == before


def test_init_from_an_existing_database(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    schema = f"shop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        conn.execute((SHOP / "shop.sql").read_bytes())
    try:
        target = tmp_path / "existing"
        assert (
            main(
                [
                    "desk",
                    "init",
                    str(target),
                    "--database-url",
                    pg_url,
                    "--schema",
                    schema,
                    "--tables",
                    "customers,orders",
                ]
            )
            == 0
        )
        config = load_config(target)
        assert config.database.source == "url" and config.database.schema_name == schema
        assert [t.name for t in config.tables] == ["customers", "orders"]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_tables_that_need_quoting_are_skipped_and_none_left_is_an_error(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = tmp_path / "quoted.sql"
    sql.write_text('CREATE TABLE "Orders" (id int PRIMARY KEY);\n', encoding="utf-8")
    assert desk_init(pg_url, tmp_path, str(tmp_path / "desk"), "--from-sql", str(sql)) == 2
    assert "no table the desk can read: Orders" in capsys.readouterr().err
    assert not (tmp_path / "desk").exists()
