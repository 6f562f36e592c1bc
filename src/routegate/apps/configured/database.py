"""A configured desk's PostgreSQL: the data (the readable tables) and the desk's own state, in separate schemas.

* **data** — ``database.schema``. With ``source = "sql"`` the SQL file (plain statements, or a ``pg_dump`` file
  whose ``public`` tables are moved there: :mod:`.script`) is loaded there on first start, in one transaction,
  and loaded again (the schema rebuilt) when the file's content changes (its sha256 is kept in the
  state schema). With ``source = "url"`` the tables are the existing ones and are never written.
* **state** — ``desk_<name>_state``: the conversation memory (``support_messages``, as the built-in desk keeps
  it), the knowledge base's chunks and files (:mod:`.kb`) and the desk's bookkeeping.
* **reader role** — ``routegate_desk_<name>_reader``, a NOLOGIN role granted ``SELECT`` on the readable
  *columns* only (column privileges), which the SQL tool takes for its statements when the login may create it;
  otherwise the SQL guard's allowlist holds alone and a warning says so.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Final

from routegate._extras import needs
from routegate._suggest import did_you_mean

with needs("desk"):
    import psycopg
    from psycopg import sql

from routegate.apps.configured.config import DeskConfig, DeskConfigError, resolve
from routegate.apps.configured.loader import arun_script
from routegate.apps.configured.mistakes import config_file, unknown_names
from routegate.apps.configured.script import sql_text
from routegate.apps.support.db import MEMORY_DDL, SupportDatabase

logger = logging.getLogger(__name__)

_STATE_DDL: Final = (
    *MEMORY_DDL,  # the conversation memory, as the built-in desk keeps it
    "CREATE TABLE IF NOT EXISTS desk_meta (key text PRIMARY KEY, value text NOT NULL)",
)


def state_schema(config: DeskConfig) -> str:
    return config.database.state_schema or _short(f"desk_{config.desk.name}_state")


def reader_role(config: DeskConfig) -> str:
    return _short(f"routegate_desk_{config.desk.name}_reader")


def _short(name: str) -> str:
    """Identifiers stay within PostgreSQL's 63 bytes: a long one keeps its start and gets a hash."""
    if len(name) <= 63:
        return name
    return name[:50] + "_" + hashlib.sha256(name.encode()).hexdigest()[:12]


def sql_source(config: DeskConfig, desk_dir: Path) -> tuple[str, str] | None:
    """The SQL file's text and sha256 (``source = "sql"``), else ``None``."""
    if config.database.source != "sql" or config.database.sql_file is None:
        return None
    path = resolve(desk_dir, config.database.sql_file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DeskConfigError(
            f"{config_file(desk_dir)}: database.sql_file: cannot read {path} ({exc}); check the path in desk.toml"
        ) from None
    return sql_text(data, source=f"database.sql_file {path}"), hashlib.sha256(data).hexdigest()


async def prepare(config: DeskConfig, desk_dir: Path, data: SupportDatabase, state: SupportDatabase) -> None:
    """Create the state schema, load (or reload) the SQL file, check the readable tables and columns exist, and
    set up the reader role. Idempotent; cheap when nothing changed."""
    async with state.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.desk.' || %s))", (config.desk.name,))
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(state.schema)))
        for statement in _STATE_DDL:
            await conn.execute(statement)
        source = sql_source(config, desk_dir)
        if source is not None:
            await _load(conn, config, data.schema, *source)
        await _check_tables(conn, config, data.schema, config_file(desk_dir))
    data.reader_role = await _reader(config, data)


async def _load(conn: psycopg.AsyncConnection[Any], config: DeskConfig, schema: str, text: str, digest: str) -> None:
    cur = await conn.execute("SELECT value FROM desk_meta WHERE key = 'sql_sha256'")
    row = await cur.fetchone()
    exists = await (
        await conn.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (schema,))
    ).fetchone()
    if row is not None and row["value"] == digest and exists is not None:
        return
    logger.info("loading %s into schema %s", config.database.sql_file, schema)
    ident = sql.Identifier(schema)
    await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
    await conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
    await conn.execute(sql.SQL("SET LOCAL search_path = {}, public").format(ident))
    await arun_script(conn, text, source=f"database.sql_file {config.database.sql_file}")
    await conn.execute("RESET search_path")
    await conn.execute(
        "INSERT INTO desk_meta (key, value) VALUES ('sql_sha256', %s) ON CONFLICT (key) DO UPDATE SET value = %s",
        (digest, digest),
    )


async def _check_tables(conn: psycopg.AsyncConnection[Any], config: DeskConfig, schema: str, path: Path) -> None:
    cur = await conn.execute(
        "SELECT c.relname AS table, a.attname AS column FROM pg_catalog.pg_attribute a "
        "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND a.attnum > 0 AND NOT a.attisdropped",
        (schema,),
    )
    real: dict[str, set[str]] = {}
    for row in await cur.fetchall():
        real.setdefault(str(row["table"]), set()).add(str(row["column"]))
    for index, table in enumerate(config.tables):
        if table.name not in real:
            raise DeskConfigError(
                f"{path}: tables[{index}] (name = {table.name!r}): no such table in schema {schema!r}"
                f"{did_you_mean(table.name, real)} (tables there: {', '.join(sorted(real)) or '(none)'}); fix the "
                "name or remove the entry"
            )
        unknown = [c for c in table.columns if c not in real[table.name]]
        if unknown:
            them = "them" if len(unknown) > 1 else "it"
            raise DeskConfigError(
                f"{path}: tables[{index}] (name = {table.name!r}).columns: "
                f"{unknown_names('column', unknown, real[table.name])} (the table's columns: "
                f"{', '.join(sorted(real[table.name]))}); fix or remove {them}"
            )


async def _reader(config: DeskConfig, data: SupportDatabase) -> str | None:
    """The reader role with ``SELECT`` on the readable columns only; ``None`` when the login may not create it."""
    name = reader_role(config)
    role = sql.Identifier(name)
    try:
        async with data.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.desk.role'))")
            cur = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
            if await cur.fetchone() is None:
                await conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOINHERIT").format(role))
            await conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(data.schema), role))
            for table in config.tables:
                target = sql.Identifier(data.schema, table.name)
                await conn.execute(sql.SQL("REVOKE ALL ON {} FROM {}").format(target, role))
                columns = sql.SQL(", ").join(sql.Identifier(c) for c in table.columns)
                await conn.execute(sql.SQL("GRANT SELECT ({}) ON {} TO {}").format(columns, target, role))
            cur = await conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER') AS member", (name,))
            found = await cur.fetchone()
            if not (found and found["member"]):
                await conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(role))
    except psycopg.errors.InsufficientPrivilege as exc:
        logger.warning(
            "the database login may not create the role %s (%s): the SQL tool runs WITHOUT its reader-role layer; "
            "the SQL guard's allowlist, the read-only transaction and the statement timeout still apply",
            name,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        return None
    return name
