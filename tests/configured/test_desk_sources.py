"""Where a desk's rows come from: an existing PostgreSQL (only read; the desk's own tables go in a schema of its
own), and a SQL file that is loaded again when it changes (conversations kept)."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path
from unittest import mock

import psycopg

from routegate.apps.support.factory import open_support_desk
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import SHOP, desk_init


def _tables(pg_url: str, schema: str) -> set[str]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
    return {str(r[0]) for r in rows}


def test_a_desk_on_an_existing_database_only_reads_it(tmp_path: Path, pg_url: str, encoder: MiniLMEncoder) -> None:
    schema = f"shop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        conn.execute((SHOP / "shop.sql").read_bytes())
    desk = tmp_path / "existing"
    with mock.patch.dict(os.environ, {"ROUTEGATE_DATA_DIR": str(tmp_path)}):
        assert main(["desk", "init", str(desk), "--database-url", pg_url, "--schema", schema, "--name", "ext"]) == 0
    before = _tables(pg_url, schema)

    async def ask() -> str:
        settings = Settings(database_url=pg_url, data_dir=tmp_path)
        async with open_support_desk(settings, desk, encoder=encoder) as opened:
            return (await opened.ask("Who placed order 1046?", session_id="ext-1")).answer

    try:
        assert asyncio.run(ask()) == "The customer of order 1046: Sofia Rossi (customer 6)."
        assert _tables(pg_url, schema) == before  # nothing written next to the user's tables
        assert "support_messages" in _tables(pg_url, "desk_ext_state")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_changed_sql_file_is_loaded_again_and_memory_stays(
    tmp_path: Path, pg_url: str, encoder: MiniLMEncoder
) -> None:
    sql = tmp_path / "shop.sql"
    shutil.copy(SHOP / "shop.sql", sql)
    desk = tmp_path / "reload"
    assert desk_init(pg_url, tmp_path, str(desk), "--from-sql", str(sql)) == 0
    settings = Settings(database_url=pg_url, data_dir=tmp_path)

    async def ask(question: str) -> tuple[str, int]:
        async with open_support_desk(settings, desk, encoder=encoder) as opened:
            answer = (await opened.ask(question, session_id="reload-1")).answer
            return answer, len(await opened.history("reload-1"))

    assert asyncio.run(ask("What is the status of order 1042?")) == ("Order 1042: status is open.", 2)
    copied = desk / "shop.sql"  # desk init copied the file into the desk directory, which reads it there
    text = copied.read_text(encoding="utf-8").replace("(1042, 1, 'open'", "(1042, 1, 'shipped'")
    copied.write_text(text, encoding="utf-8")
    assert asyncio.run(ask("What is the status of order 1042?")) == ("Order 1042: status is shipped.", 4)
