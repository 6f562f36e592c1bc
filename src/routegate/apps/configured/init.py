"""``routegate desk init``: from a SQL file (or an existing PostgreSQL) and a docs folder to ``DIR/desk.toml``.

The SQL file is run by PostgreSQL itself, in a scratch schema of the embedded server that is dropped afterwards,
and the tables are read back from the catalog (:mod:`.introspect`). The configuration is written to a temporary
directory next to ``DIR`` and renamed into place only once it is complete and loads cleanly: a failure leaves
nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routegate._extras import needs
from routegate.apps.configured.config import CONFIG_FILE, DeskConfig, DeskConfigError, is_identifier, load_config
from routegate.apps.configured.documents import Document, read_documents
from routegate.apps.configured.generate import desk_data
from routegate.apps.configured.introspect import Table, introspect, load_sql, table_names
from routegate.apps.configured.render import render
from routegate.apps.configured.script import sql_text


@dataclass(frozen=True, slots=True)
class InitResult:
    """What ``desk init`` wrote, and what it found on the way (for the summary it prints)."""

    directory: Path
    config: DeskConfig
    tables: tuple[Table, ...]
    documents: tuple[Document, ...]
    skipped_tables: tuple[str, ...]
    private_columns: tuple[str, ...]
    left_out: str = ""
    """What of the SQL file was not run (``10 owner and privileges, 2 settings``): see :mod:`.script`."""


def desk_name(directory: Path, given: str | None) -> str:
    name = given if given is not None else directory.resolve().name.lower().replace("-", "_").replace(" ", "_")
    if not is_identifier(name):
        raise DeskConfigError(
            f"the desk name {name!r} (from {'--name' if given else 'the directory name'}) must be lower-case "
            "letters, digits and _ starting with a letter; pass --name NAME"
        )
    return name


def _relative(path: Path, directory: Path) -> str:
    """``path`` as the configuration writes it: relative to the desk directory when that is possible."""
    try:
        return os.path.relpath(path.resolve(), directory.resolve())
    except ValueError:  # another drive (Windows)
        return str(path.resolve())


def _check_target(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise DeskConfigError(
            f"{directory} exists and is not an empty directory; choose a new directory for the desk (init never "
            "overwrites one)"
        )


def _pick(names: list[str], wanted: Sequence[str] | None, where: str) -> tuple[list[str], list[str]]:
    """The tables to use (``--tables`` or every one whose name needs no quoting) and the ones skipped."""
    if wanted:
        unknown = [t for t in wanted if t not in names]
        if unknown:
            raise DeskConfigError(
                f"--tables: {', '.join(unknown)} not found in {where}; tables there: {', '.join(names) or '(none)'}"
            )
        return list(wanted), []
    usable = [n for n in names if is_identifier(n)]
    return usable, [n for n in names if n not in usable]


def _from_sql(url: str, sql_file: Path, wanted: Sequence[str] | None) -> tuple[list[Table], list[str], str]:
    with needs("desk"):
        import psycopg
        from psycopg import sql

    try:
        data = sql_file.read_bytes()
    except OSError as exc:
        raise DeskConfigError(f"--from-sql {sql_file}: cannot read it ({exc}); give a readable SQL file") from None
    text = sql_text(data, source=f"--from-sql {sql_file}")
    if not text.strip():
        raise DeskConfigError(f"--from-sql {sql_file}: the file is empty; give the SQL that creates the tables")
    scratch = f"routegate_init_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            script = load_sql(conn, scratch, text, source=str(sql_file))  # rolled back (schema and all) on error
            names, skipped = _pick(table_names(conn, scratch), wanted, str(sql_file))
            return introspect(conn, scratch, names), skipped, script.skipped_summary()
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(scratch)))


def _from_url(url: str, schema: str, wanted: Sequence[str] | None) -> tuple[list[Table], list[str]]:
    with needs("desk"):
        import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            names, skipped = _pick(table_names(conn, schema), wanted, f"schema {schema!r} of the database")
            if not names:
                raise DeskConfigError(f"--database-url: schema {schema!r} has no tables; pass --schema NAME")
            return introspect(conn, schema, names), skipped
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeskConfigError(f"--database-url: could not connect ({first}); check the URL") from None


def init_desk(
    directory: Path,
    *,
    embedded_url: str | None = None,
    from_sql: Path | None = None,
    database_url: str | None = None,
    schema: str = "public",
    kb: Sequence[Path] = (),
    tables: Sequence[str] | None = None,
    name: str | None = None,
) -> InitResult:
    """Introspect, generate, write ``directory/desk.toml`` atomically. ``embedded_url``: the embedded server the
    SQL file is loaded into (``--from-sql``)."""
    directory = Path(directory)
    if (from_sql is None) == (database_url is None):
        raise DeskConfigError("give exactly one of --from-sql SCHEMA.sql and --database-url URL")
    _check_target(directory)
    desk = desk_name(directory, name)
    for root in kb:
        if not root.exists():
            raise DeskConfigError(f"--kb {root}: no such folder or file; give the docs folder")
    documents = read_documents(list(kb))
    database: dict[str, Any]
    left_out = ""
    if from_sql is not None:
        if not from_sql.is_file():
            raise DeskConfigError(f"--from-sql {from_sql}: no such file; give the SQL file that creates the tables")
        assert embedded_url is not None, "--from-sql needs the embedded server's URL"
        found, skipped, left_out = _from_sql(embedded_url, from_sql, tables)
        database = {"source": "sql", "sql_file": _relative(from_sql, directory), "schema": f"desk_{desk}"}
    else:
        assert database_url is not None
        if not is_identifier(schema):
            raise DeskConfigError(f"--schema {schema!r} must be a lower-case identifier")
        found, skipped = _from_url(database_url, schema, tables)
        database = {"source": "url", "schema": schema}
    if not found:
        raise DeskConfigError(
            f"no table the desk can read: {', '.join(skipped) or 'none was found'} (names that need quoting are "
            "skipped); rename the tables to lower-case names or name them with --tables"
        )
    data = desk_data(
        desk,
        tables=found,
        documents=documents,
        database=database,
        knowledge_paths=[_relative(root, directory) for root in kb],
    )
    text = render(data)
    parent = directory.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.init-", dir=parent))
    try:
        (staging / CONFIG_FILE).write_text(text, encoding="utf-8")
        # the staging directory is a sibling of the final one: the relative paths resolve the same from both
        config = load_config(staging)
        if directory.exists():
            directory.rmdir()  # empty (checked above)
        os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    private = tuple(
        f"{t.name}.{c.name}" for t in found for c in t.columns if c.name not in config.table(t.name).columns
    )
    return InitResult(directory, config, tuple(found), tuple(documents), tuple(skipped), private, left_out)
