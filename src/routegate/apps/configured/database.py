"""A configured desk's PostgreSQL: the data (the readable tables) and the desk's own state, in separate schemas.

* **data** — ``database.schema``. With ``source = "sql"`` it is the desk's own, ``desk_<name>``: the SQL file
  (plain statements, or a ``pg_dump`` file whose ``public`` tables are moved there: :mod:`.script`) is loaded there
  on first start, in one transaction, as the desk's **owner role** ``routegate_desk_<name>_owner``, which owns the
  schema and may reach nothing outside it (:mod:`._owner`, :mod:`.loader`), and loaded again (the schema rebuilt)
  when the file's content changes (its sha256 is kept in the state schema). The schema carries a marker (its
  comment: ``routegate desk <name> ...``) written when the desk made it: a desk drops and rebuilds only a schema
  that carries its own marker (or, made by a version before markers, whose load its own state recorded), never
  another desk's. With ``source = "url"`` the tables are the existing ones and are never written; a schema that is
  a desk's own (its tables or its state) is refused there.
* **state** — ``desk_<name>_state``: the conversation memory (``support_messages``, as the built-in desk keeps
  it), the knowledge base's chunks and files (:mod:`.kb`) and the desk's bookkeeping (``desk_meta``, which also
  records which desk the schema is: another desk naming it as its ``state_schema`` is refused).
* **reader role** — ``routegate_desk_<name>_reader``, a NOLOGIN role granted ``SELECT`` on the readable
  *columns* only (column privileges), which the SQL tool takes for its statements when the login may create it;
  otherwise the SQL guard's allowlist holds alone and a warning says so.

The set-up runs on a connection of its own, opened for it and closed after (never one of the desk's pools), in one
transaction: a refused file leaves no schema, role or row behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path
from typing import Any, Final

from routegate._extras import needs
from routegate._suggest import did_you_mean

with needs("desk"):
    import psycopg
    from psycopg import sql

from routegate.apps.configured._files import read_regular
from routegate.apps.configured._owner import DeskSchema, check_owner, create_owner, create_schema
from routegate.apps.configured.config import DeskConfig, DeskConfigError, desk_path, short_identifier
from routegate.apps.configured.loader import LoadLimits, load_connection, load_script
from routegate.apps.configured.mistakes import config_file, unknown_names
from routegate.apps.configured.script import sql_text
from routegate.apps.support.db import MEMORY_DDL, SupportDatabase

logger = logging.getLogger(__name__)

MAX_SQL_BYTES: Final = 256 * 1024 * 1024
"""The largest SQL file a desk loads (more is data for ``source = "url"``)."""

_STATE_DDL: Final = (
    *MEMORY_DDL,  # the conversation memory, as the built-in desk keeps it
    "CREATE TABLE IF NOT EXISTS desk_meta (key text PRIMARY KEY, value text NOT NULL)",
)
_SCHEMA_SQL: Final = (
    "SELECT n.nspowner = r.oid AS owned, pg_catalog.obj_description(n.oid, 'pg_namespace') AS marker, "
    "pg_catalog.to_regclass(pg_catalog.quote_ident(n.nspname) || '.desk_meta') IS NOT NULL AS state "
    "FROM pg_catalog.pg_namespace n LEFT JOIN pg_catalog.pg_roles r ON r.rolname = %s WHERE n.nspname = %s"
)


def state_schema(config: DeskConfig) -> str:
    return config.database.state_schema or short_identifier(f"desk_{config.desk.name}_state")


def reader_role(config: DeskConfig) -> str:
    return short_identifier(f"routegate_desk_{config.desk.name}_reader")


def owner_role(config: DeskConfig) -> str:
    """The role the desk's SQL file runs as and its schema belongs to (:mod:`._owner`)."""
    return short_identifier(f"routegate_desk_{config.desk.name}_owner")


def marker(config: DeskConfig) -> str:
    """The comment on a desk's data schema that says whose it is: the desk's name and its state schema."""
    return f"routegate desk {config.desk.name} (state schema {state_schema(config)}): tables loaded from its SQL file"


def sql_source(config: DeskConfig, desk_dir: Path) -> tuple[str, str] | None:
    """The SQL file's text and sha256 (``source = "sql"``), else ``None``. The file is a regular file in the desk
    directory (no symbolic link: :func:`~.config.desk_path`), read without following one."""
    if config.database.source != "sql" or config.database.sql_file is None:
        return None
    where = config_file(desk_dir)
    path = desk_path(desk_dir, config.database.sql_file, f"{where}: database.sql_file")
    try:
        data = read_regular(path, limit=MAX_SQL_BYTES)
    except OSError as exc:
        raise DeskConfigError(
            f"{where}: database.sql_file: cannot read {path} ({exc.strerror or type(exc).__name__}); it must be a regular "
            "file in the desk directory"
        ) from None
    return sql_text(data, source=f"database.sql_file {path}"), hashlib.sha256(data).hexdigest()


async def prepare(config: DeskConfig, desk_dir: Path, data: SupportDatabase, state: SupportDatabase) -> None:
    """Create the state schema, load (or reload) the SQL file, check the readable tables and columns exist, and
    set up the reader role. Idempotent; cheap when nothing changed."""
    source = sql_source(config, desk_dir)
    await asyncio.to_thread(_prepare, config, config_file(desk_dir), data.url, state.schema, data.schema, source)
    data.reader_role = await _reader(config, data)


def _prepare(
    config: DeskConfig, where: Path, url: str, state: str, schema: str, source: tuple[str, str] | None
) -> None:
    with load_connection(url) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('routegate.desk.' || %s))", (config.desk.name,))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(state)))
        conn.execute(sql.SQL("SET LOCAL search_path = {}, public").format(sql.Identifier(state)))
        for statement in _STATE_DDL:
            conn.execute(statement)
        _claim_state(conn, config, state, where)
        if source is None:
            if schema != state:  # one schema holding a desk whole (its tables beside its state) is no other desk's
                _refuse_a_desks_schema(conn, schema, where)
        else:
            _load(conn, config, state, where, *source)
        _check_tables(conn, config, schema, where)


def _claim_state(conn: psycopg.Connection[Any], config: DeskConfig, state: str, where: Path) -> None:
    """Record (once) which desk the state schema is; refused when it is another desk's."""
    conn.execute(
        "INSERT INTO desk_meta (key, value) VALUES ('desk', %s) ON CONFLICT (key) DO NOTHING", (config.desk.name,)
    )
    found = conn.execute("SELECT value FROM desk_meta WHERE key = 'desk'").fetchone()
    if found is None or found[0] != config.desk.name:
        owner = found[0] if found else "?"
        raise DeskConfigError(
            f"{where}: database.state_schema {state!r} is the state (conversations, knowledge base) of the desk "
            f"{owner!r}; a desk keeps its state in a schema of its own: name another one (or none: desk_<name>_state)"
        )


def _refuse_a_desks_schema(conn: psycopg.Connection[Any], schema: str, where: Path) -> None:
    """``source = "url"`` reads tables no desk owns: not a desk's tables or state."""
    found = conn.execute(_SCHEMA_SQL, ("", schema)).fetchone()
    if found is not None and (found[2] or str(found[1] or "").startswith("routegate desk ")):
        raise DeskConfigError(
            f"{where}: database.schema {schema!r} is a desk's own schema (its tables or its state); with source = "
            '"url" a desk reads your tables: point schema at them'
        )


def _load(conn: psycopg.Connection[Any], config: DeskConfig, state: str, where: Path, text: str, digest: str) -> None:
    target = DeskSchema(config.database.schema_name, owner_role(config), marker(config))
    meta = sql.Identifier(state, "desk_meta")
    recorded = conn.execute(sql.SQL("SELECT value FROM {} WHERE key = 'sql_sha256'").format(meta)).fetchone()
    found = conn.execute(_SCHEMA_SQL, (target.owner, target.name)).fetchone()
    # the desk's own: its mark, or no mark at all and a load this desk's state recorded (made before marks)
    ours = found is not None and (found[1] == target.marker or (found[1] is None and recorded is not None))
    if found is not None and not ours:
        raise DeskConfigError(
            f"{where}: database.schema {target.name!r} exists and is not this desk's (it has no mark of the desk "
            f"{config.desk.name!r}); a desk drops and rebuilds only the schema it made: drop that schema yourself if "
            "it is a leftover, or rename the desk"
        )
    fit = check_owner(conn, target)
    if found is not None and fit and found[0] and found[1] == target.marker and recorded and recorded[0] == digest:
        return
    logger.info("loading %s into schema %s as role %s", config.database.sql_file, target.name, target.owner)
    create_owner(conn, target)
    if found is not None:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(target.name)))
    create_schema(conn, target)
    limits = LoadLimits(config.database.load_statement_seconds, config.database.load_seconds)
    load_script(conn, text, target, source=f"database.sql_file {config.database.sql_file}", limits=limits)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (key, value) VALUES ('sql_sha256', %s) ON CONFLICT (key) DO UPDATE SET value = %s"
        ).format(meta),
        (digest, digest),
    )


_COLUMNS_SQL: Final = (
    "SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND a.attnum > 0 AND NOT a.attisdropped"
)


def _check_tables(conn: psycopg.Connection[Any], config: DeskConfig, schema: str, where: Path) -> None:
    real: dict[str, set[str]] = {}
    for table, column in conn.execute(_COLUMNS_SQL, (schema,)).fetchall():
        real.setdefault(str(table), set()).add(str(column))
    for index, table in enumerate(config.tables):
        if table.name not in real:
            raise DeskConfigError(
                f"{where}: tables[{index}] (name = {table.name!r}): no such table in schema {schema!r}"
                f"{did_you_mean(table.name, real)} (tables there: {', '.join(sorted(real)) or '(none)'}); fix the "
                "name or remove the entry"
            )
        unknown = [c for c in table.columns if c not in real[table.name]]
        if unknown:
            them = "them" if len(unknown) > 1 else "it"
            raise DeskConfigError(
                f"{where}: tables[{index}] (name = {table.name!r}).columns: "
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
