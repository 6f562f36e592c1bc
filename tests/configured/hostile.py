"""Helpers of the attack tests: a desk directory around a SQL file, and what lies outside a desk's schema, read from
the catalog (roles, role settings, event triggers, triggers, schemas, large objects, the built-in desk's rows)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg

TABLE_SQL = "CREATE TABLE things (id integer PRIMARY KEY, name text);\nINSERT INTO things VALUES (1, 'lamp');\n"


def desk_name() -> str:
    return f"h{uuid.uuid4().hex[:10]}"


def desk_toml(name: str, *, schema: str | None = None, extra: str = "", database: str = "") -> str:
    return f"""[desk]
name = "{name}"

[database]
source = "sql"
sql_file = "data.sql"
schema = "{schema or f"desk_{name}"}"
{database}
[[tables]]
name = "things"
label = "thing"
plural = "things"
primary_key = "id"
name_column = "name"
columns = ["id", "name"]

[[routes]]
name = "things"
kind = "sql"
tables = ["things"]
examples = ["show thing 1", "what is thing 2?"]

[[routes]]
name = "chat"
kind = "llm"
examples = ["hello", "who are you?"]
{extra}"""


def hostile_desk(base: Path, sql: str, *, name: str | None = None, **toml: Any) -> Path:
    """A desk directory whose SQL file is ``TABLE_SQL`` followed by ``sql``."""
    name = name or desk_name()
    directory = base / name
    directory.mkdir(parents=True)
    (directory / "data.sql").write_text(TABLE_SQL + sql, encoding="utf-8")
    (directory / "desk.toml").write_text(desk_toml(name, **toml), encoding="utf-8")
    return directory


_BUILTIN_TABLES = ("customers", "tickets")


def outside(pg_url: str) -> dict[str, Any]:
    """Everything a desk's SQL file must not change, as the catalog says it (a refused file leaves the desk's own
    role and schemas out too: they are part of it)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        state: dict[str, Any] = {
            "roles": conn.execute(
                "SELECT rolname, rolsuper, rolcanlogin, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles ORDER BY 1"
            ).fetchall(),
            "memberships": conn.execute(
                "SELECT roleid::regrole::text, member::regrole::text FROM pg_auth_members ORDER BY 1, 2"
            ).fetchall(),
            "role settings": conn.execute(
                "SELECT setdatabase, setrole::regrole::text, setconfig FROM pg_db_role_setting ORDER BY 1, 2"
            ).fetchall(),
            "event triggers": conn.execute("SELECT evtname FROM pg_event_trigger ORDER BY 1").fetchall(),
            "triggers": conn.execute(
                "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2"
            ).fetchall(),
            "schemas": conn.execute("SELECT nspname FROM pg_namespace ORDER BY 1").fetchall(),
            "large objects": conn.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone(),
            "public": conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace ORDER BY 1"
            ).fetchall(),
            "functions": conn.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
            ).fetchall(),
            "databases": conn.execute("SELECT datname, datdba::regrole::text FROM pg_database ORDER BY 1").fetchall(),
        }
        if conn.execute("SELECT to_regclass('support.support_messages')").fetchone() != (None,):
            state["messages"] = conn.execute(
                "SELECT session_id, role, content FROM support.support_messages ORDER BY id"
            ).fetchall()
        for table in _BUILTIN_TABLES:
            if conn.execute("SELECT to_regclass(%s)", (f"desk_support.{table}",)).fetchone() != (None,):
                state[table] = conn.execute(
                    f"SELECT to_jsonb(t)::text FROM desk_support.{table} t ORDER BY 1"
                ).fetchall()
    return state


def relations_of(pg_url: str, schema: str) -> list[tuple[str, str]]:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT c.relname, c.relowner::regrole::text FROM pg_class c "
            "WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s) ORDER BY 1",
            (schema,),
        ).fetchall()
