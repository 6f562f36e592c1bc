"""Schema and seed data on the real embedded PostgreSQL."""

from __future__ import annotations

import pytest

from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.configured.kb import ensure_tables, ingest
from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.data import CUSTOMERS, TICKETS
from routegate.apps.support.db import READER_ROLE, SupportDatabase, check_schema_name
from routegate.embed import MiniLMEncoder
from routegate.errors import ConfigurationError

pytestmark = pytest.mark.integration


async def test_seed_is_the_spec_data_exactly(db: SupportDatabase) -> None:
    async with db.connection() as conn:
        customers = await (await conn.execute("SELECT id, name, city FROM customers ORDER BY id")).fetchall()
        tickets = await (
            await conn.execute("SELECT id, customer_id, issue, status FROM tickets ORDER BY id")
        ).fetchall()
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
    assert len(CUSTOMERS) == 3 and len(TICKETS) == 3


async def test_ensure_schema_is_idempotent(db: SupportDatabase) -> None:
    await db.ensure_schema()
    await db.ensure_schema()
    async with db.connection() as conn:
        counts = await (
            await conn.execute("SELECT (SELECT count(*) FROM customers) AS c, (SELECT count(*) FROM tickets) AS t")
        ).fetchone()
    assert counts == {"c": 3, "t": 3}


async def test_the_embedding_size_is_no_longer_asked_for(db: SupportDatabase) -> None:
    """The help articles are the desk's knowledge base now: ``embedding_dim`` is ignored, with a warning."""
    with pytest.warns(DeprecationWarning, match="embedding_dim"):
        await db.ensure_schema(embedding_dim=8)


async def test_changing_the_embedding_size_rebuilds_the_knowledge_base(
    db: SupportDatabase, encoder: MiniLMEncoder
) -> None:
    await ingest(builtin_config(), builtin_desk_dir(), db, encoder)
    await ensure_tables(db, 8)
    async with db.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute "
                "WHERE attrelid = 'kb_chunks'::regclass AND attname = 'embedding'"
            )
        ).fetchone()
        count = await (await conn.execute("SELECT (SELECT count(*) FROM kb_files) AS n")).fetchone()
    assert row == {"t": "vector(8)"}
    assert count == {"n": 0}  # every document is embedded again on the next ingest


async def test_the_reader_role_exists_on_the_embedded_server(db: SupportDatabase) -> None:
    assert db.reader_role == READER_ROLE


@pytest.mark.parametrize("name", ["", "Support", "a-b", "x;drop", "1abc", "a" * 64])
def test_bad_schema_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="schema name"):
        check_schema_name(name)
