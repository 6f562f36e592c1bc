"""Schema and seed data on the real embedded PostgreSQL."""

from __future__ import annotations

import pytest

from routegate.apps.support.data import ARTICLES, CUSTOMERS, TICKETS
from routegate.apps.support.db import READER_ROLE, SupportDatabase, check_schema_name
from routegate.errors import ConfigurationError

pytestmark = pytest.mark.integration


async def test_seed_is_the_spec_data_exactly(db: SupportDatabase) -> None:
    async with db.connection() as conn:
        customers = await (await conn.execute("SELECT id, name, city FROM customers ORDER BY id")).fetchall()
        tickets = await (
            await conn.execute("SELECT id, customer_id, issue, status FROM tickets ORDER BY id")
        ).fetchall()
        articles = await (await conn.execute("SELECT id, title, content FROM kb_articles ORDER BY id")).fetchall()
    assert [(r["id"], r["name"], r["city"]) for r in customers] == [
        (1, "John Doe", "New York"),
        (2, "Jane Smith", "London"),
        (3, "Alex Brown", "Toronto"),
    ]
    assert [(r["id"], r["customer_id"], r["issue"], r["status"]) for r in tickets] == [
        (1, 1, "Login not working", "open"),
        (2, 1, "Password reset issue", "closed"),
        (3, 2, "Billing question", "open"),
    ]
    assert [(r["id"], r["title"], r["content"]) for r in articles] == [(a.id, a.title, a.content) for a in ARTICLES]
    assert len(CUSTOMERS) == 3 and len(TICKETS) == 3


async def test_ensure_schema_is_idempotent(db: SupportDatabase) -> None:
    await db.ensure_schema(embedding_dim=384)
    await db.ensure_schema(embedding_dim=384)
    async with db.connection() as conn:
        counts = await (
            await conn.execute(
                "SELECT (SELECT count(*) FROM customers) AS c, (SELECT count(*) FROM tickets) AS t,"
                " (SELECT count(*) FROM kb_articles) AS a"
            )
        ).fetchone()
    assert counts == {"c": 3, "t": 3, "a": 3}


async def test_changing_the_embedding_size_rebuilds_the_article_table(db: SupportDatabase) -> None:
    await db.ensure_schema(embedding_dim=8)
    async with db.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute "
                "WHERE attrelid = 'kb_articles'::regclass AND attname = 'embedding'"
            )
        ).fetchone()
        count = await (await conn.execute("SELECT count(*) AS n FROM kb_articles")).fetchone()
    assert row == {"t": "vector(8)"}
    assert count == {"n": 3}


async def test_the_reader_role_exists_on_the_embedded_server(db: SupportDatabase) -> None:
    assert db.reader_role == READER_ROLE


@pytest.mark.parametrize("name", ["", "Support", "a-b", "x;drop", "1abc", "a" * 64])
def test_bad_schema_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="schema name"):
        check_schema_name(name)
