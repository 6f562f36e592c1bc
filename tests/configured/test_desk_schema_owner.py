"""A desk owns its schemas, and only its own: the data schema a desk may create or drop is ``desk_<name>``, marked as
the desk's when it made it, never another desk's or the built-in desk's; a state schema is claimed by one desk; a
desk that reads an existing database may not name a desk's schema. What a desk directory runs on this machine is
shown (``desk init``, ``desk check``). Through ``routegate ask --desk``, ``desk init`` and ``desk check``; the
built-in desk's schema and rows read back from the catalog."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from unittest import mock

import psycopg
import pytest

from routegate.apps.support.factory import open_support_desk
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import SHOP, desk_init
from .hostile import desk_name, desk_toml, hostile_desk, outside


def _ask(pg_url: str, data_dir: Path, directory: Path) -> int:
    env = {"DATABASE_URL": pg_url, "ROUTEGATE_DATA_DIR": str(data_dir)}
    with mock.patch.dict(os.environ, env):
        return main(["ask", "--desk", str(directory), "show thing 1"])


CLAIMS = {
    "another desk names the built-in desk's schema": (
        {"schema": "desk_support"},
        "database.schema 'desk_support': with source = \"sql\" a desk loads its tables into its own schema",
    ),
    "a desk of the built-in's name, with a state of its own, would rebuild its schema": (
        {"name": "support"},  # its state: desk_support_state, not the built-in's
        "database.schema 'desk_support' exists and is not this desk's",
    ),
    "a desk takes the built-in desk's state": (
        {"database": 'state_schema = "support"\n'},
        "database.state_schema 'support' is the state (conversations, knowledge base) of the desk 'support'",
    ),
}


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_a_desk_may_not_claim_the_builtin_desks_schemas_and_nothing_is_dropped(
    tmp_path: Path, pg_url: str, victim: str, capsys: pytest.CaptureFixture[str], claim: str
) -> None:
    toml, said = CLAIMS[claim]
    directory = hostile_desk(tmp_path, "", **toml)
    before = outside(pg_url)

    assert _ask(pg_url, tmp_path, directory) == 2

    assert said in capsys.readouterr().err
    assert outside(pg_url) == before  # the built-in desk's schemas, tickets, customers and conversations


def test_a_desk_reading_a_database_may_not_name_a_desks_schema(
    tmp_path: Path, pg_url: str, victim: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = desk_name()
    directory = tmp_path / name
    directory.mkdir()
    toml = desk_toml(name).replace('source = "sql"\nsql_file = "data.sql"\n', 'source = "url"\n')
    toml = toml.replace(f'schema = "desk_{name}"', 'schema = "support"').replace(
        'name = "things"\nlabel', 'name = "support_messages"\nlabel'
    )
    toml = toml.replace('tables = ["things"]', 'tables = ["support_messages"]').replace(
        '"id", "name"', '"id", "content"'
    )
    (directory / "desk.toml").write_text(
        toml.replace('name_column = "name"', 'name_column = "content"'), encoding="utf-8"
    )

    assert _ask(pg_url, tmp_path, directory) == 2

    assert "database.schema 'support' is a desk's own schema (its tables or its state)" in capsys.readouterr().err
    with psycopg.connect(pg_url) as conn:  # no grant on the built-in desk's conversations to this desk's reader
        grants = conn.execute(
            "SELECT count(*) FROM information_schema.column_privileges WHERE table_schema = 'support' AND grantee = %s",
            (f"routegate_desk_{name}_reader",),
        ).fetchone()
    assert grants == (0,)


def test_a_schema_the_desk_did_not_make_is_not_dropped(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = desk_name()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA desk_{name}")
        conn.execute(f"CREATE TABLE desk_{name}.precious (id integer)")
    directory = hostile_desk(tmp_path, "", name=name)

    assert _ask(pg_url, tmp_path, directory) == 2

    assert f"database.schema 'desk_{name}' exists and is not this desk's" in capsys.readouterr().err
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"desk_{name}.precious",)).fetchone() == (True,)


def test_a_schema_an_earlier_version_loaded_is_loaded_again_as_the_owner_role(
    tmp_path: Path, pg_url: str, encoder: MiniLMEncoder
) -> None:
    """Before owner roles and marks, the login owned the schema (and what the file made in it); this desk's state
    recorded the load. The desk takes its schema back, rebuilt as its owner role's."""
    name = desk_name()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA desk_{name}")
        conn.execute(f"CREATE TABLE desk_{name}.things (id integer PRIMARY KEY, name text)")
        conn.execute(f"CREATE SCHEMA desk_{name}_state")
        conn.execute(f"CREATE TABLE desk_{name}_state.desk_meta (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute(f"INSERT INTO desk_{name}_state.desk_meta VALUES ('sql_sha256', 'an older file')")
    directory = hostile_desk(tmp_path, "", name=name)

    async def start() -> None:
        settings = Settings(database_url=pg_url, data_dir=tmp_path)
        async with open_support_desk(settings, directory, encoder=encoder, ingest_on_start=False):
            pass

    asyncio.run(start())
    with psycopg.connect(pg_url) as conn:
        owner = conn.execute(
            "SELECT n.nspowner::regrole::text, c.relowner::regrole::text FROM pg_namespace n "
            "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'things' WHERE n.nspname = %s",
            (f"desk_{name}",),
        ).fetchone()
    assert owner == (f"routegate_desk_{name}_owner", f"routegate_desk_{name}_owner")


def test_desk_check_says_what_the_desk_directory_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = (
        '\n[[mcp_servers]]\nname = "inventory"\ncommand = "python"\nargs = ["inventory_server.py", "--port", "7"]\n'
        'env = { API_TOKEN = "s3cr3t-token" }\n\n[[mcp_servers]]\nname = "remote"\nurl = "https://mcp.example/api"\n'
    )
    directory = hostile_desk(tmp_path, "", extra=extra)

    assert main(["desk", "check", str(directory)]) == 0

    out = capsys.readouterr().out
    assert "commands it runs on this machine:\n" in out
    assert f"  inventory: python inventory_server.py --port 7 (in {directory.resolve()}; env: API_TOKEN;" in out
    assert "MCP server remote over HTTP: https://mcp.example/api" in out
    assert "s3cr3t-token" not in out  # the environment's names, never its values
    assert f"loaded into schema desk_{directory.name} as role routegate_desk_{directory.name}_owner" in out


def test_desk_init_says_the_new_desk_runs_no_command(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert desk_init(pg_url, tmp_path, str(tmp_path / "plain"), "--from-sql", str(SHOP / "shop.sql")) == 0
    assert "commands it runs on this machine: none" in capsys.readouterr().out


def test_a_real_pg_dump_of_the_builtin_desk_loads_its_owner_lines_left_out(
    tmp_path: Path, pg_url: str, victim: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pg_dump`` of the built-in desk's schema as a desk loads it (owned by its owner role, the reader's grants,
    the desk's mark): the owner and grant lines are left out and counted, the tables and rows come through."""
    import pgserver

    binary = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump"
    if not binary.is_file():
        pytest.skip("the pgserver package ships no pg_dump here")
    dumped = subprocess.run(
        [str(binary), "--dbname", pg_url, "--schema", "desk_support"], check=True, capture_output=True, timeout=60
    ).stdout.decode()
    assert "OWNER TO routegate_desk_support_owner" in dumped and "GRANT SELECT(" in dumped
    sql = tmp_path / "support_dump.sql"
    sql.write_text(dumped, encoding="utf-8")

    assert desk_init(pg_url, tmp_path, str(tmp_path / "again"), "--from-sql", str(sql)) == 0

    out = capsys.readouterr().out
    assert "customers (3 rows; primary key id)" in out and "tickets (3 rows; primary key id" in out
    assert "owner and privileges" in out and "schema statements" in out
    shutil.rmtree(tmp_path / "again")
