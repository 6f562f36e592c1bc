"""``routegate desk init``: from a SQL file (or an existing PostgreSQL) and a docs folder to ``DIR/desk.toml``.

The SQL file is run by PostgreSQL itself, in a scratch schema of the embedded server, as a scratch role with no
rights outside that schema (:mod:`._owner`), in a transaction that is rolled back once the tables are read back
from the catalog (:mod:`.introspect`): nothing of the file, the schema or the role stays.

A desk directory holds what the desk reads: the SQL file and the documents are copied into ``DIR`` (the documents'
regular files only, each checked before it is read: :mod:`.documents`), and ``desk.toml`` names them relative to
it. The directory is made next to ``DIR`` under a temporary name and renamed into place only once it is complete
and its configuration loads cleanly: a failure leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routegate._extras import needs
from routegate.apps.configured._files import read_regular
from routegate.apps.configured.config import (
    CONFIG_FILE,
    DeskConfig,
    DeskConfigError,
    data_schema,
    is_identifier,
    load_config,
)
from routegate.apps.configured.database import MAX_SQL_BYTES
from routegate.apps.configured.documents import Document, DocumentFiles, read_documents
from routegate.apps.configured.generate import desk_data
from routegate.apps.configured.introspect import Table, introspect, table_names
from routegate.apps.configured.loader import DEFAULT_LIMITS, LoadLimits, load_connection, scratch_load
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
    copied: tuple[str, ...] = ()
    """What was copied into the desk directory (the SQL file, the docs folders), as ``desk.toml`` names them."""
    skipped_documents: tuple[str, ...] = ()
    """Files of the docs folders passed by (``docs/x.md (a symbolic link: ...)``)."""


def desk_name(directory: Path, given: str | None) -> str:
    name = given if given is not None else directory.resolve().name.lower().replace("-", "_").replace(" ", "_")
    if not is_identifier(name):
        raise DeskConfigError(
            f"the desk name {name!r} (from {'--name' if given else 'the directory name'}) must be lower-case "
            "letters, digits and _ starting with a letter; pass --name NAME"
        )
    return name


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


def _from_sql(
    url: str, text: str, source: str, wanted: Sequence[str] | None, limits: LoadLimits
) -> tuple[list[Table], list[str], str]:
    with needs("desk"):
        import psycopg

    with load_connection(url) as conn, scratch_load(conn, text, source=source, limits=limits) as (scratch, script):
        names, skipped = _pick(table_names(conn, scratch), wanted, source)
        if not names and not skipped:
            raise DeskConfigError(
                f"{source}: the SQL file created no table in the desk's schema; it needs CREATE TABLE statements "
                "(tables of public, or of a schema the file creates, land in the desk's; others do not)"
            )
        try:
            return introspect(conn, scratch, names), skipped, script.skipped_summary()
        except psycopg.Error as exc:
            raise DeskConfigError(
                f"{source}: reading the tables the SQL file made failed ({exc.diag.message_primary or type(exc).__name__})"
                "; its views and functions run as a role that may read only the desk's own schema: fix or remove them"
            ) from None


def _sql_file(path: Path) -> tuple[bytes, str]:
    """The ``--from-sql`` file's bytes and text (the path as given; the file a regular one)."""
    if not path.is_file():
        raise DeskConfigError(f"--from-sql {path}: no such file; give the SQL file that creates the tables")
    try:
        data = read_regular(path.resolve(), limit=MAX_SQL_BYTES)
    except OSError as exc:
        raise DeskConfigError(
            f"--from-sql {path}: cannot read it ({exc.strerror or exc}); give a readable SQL file"
        ) from None
    text = sql_text(data, source=f"--from-sql {path}")
    if not text.strip():
        raise DeskConfigError(f"--from-sql {path}: the file is empty; give the SQL that creates the tables")
    return data, text


def _names(from_sql: Path | None, kb: Sequence[Path]) -> list[str]:
    """What the desk directory will hold, by name: the SQL file and each docs root; two of a name are refused."""
    names = [CONFIG_FILE] + ([from_sql.name] if from_sql is not None else []) + [root.resolve().name for root in kb]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DeskConfigError(
            f"the desk directory would hold two things named {', '.join(twice)} (desk.toml, the SQL file and each --kb "
            "are copied into it by name); rename one"
        )
    return names[1:]


def _copy_in(staging: Path, sql_name: str | None, sql_data: bytes, docs: DocumentFiles) -> None:
    if sql_name is not None:
        (staging / sql_name).write_bytes(sql_data)
    for document, data in zip(docs.documents, docs.files, strict=True):
        target = staging / document.source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


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
    limits: LoadLimits = DEFAULT_LIMITS,
) -> InitResult:
    """Introspect, generate, write ``directory/desk.toml`` (and copy the SQL file and the documents in) atomically.
    ``embedded_url``: the embedded server the SQL file is loaded into (``--from-sql``); ``limits``: the load's."""
    directory = Path(directory)
    if (from_sql is None) == (database_url is None):
        raise DeskConfigError("give exactly one of --from-sql SCHEMA.sql and --database-url URL")
    _check_target(directory)
    desk = desk_name(directory, name)
    for root in kb:
        if not root.exists():
            raise DeskConfigError(f"--kb {root}: no such folder or file; give the docs folder")
    names = _names(from_sql, kb)
    docs = read_documents([root.resolve() for root in kb])
    database: dict[str, Any]
    left_out = ""
    sql_data = b""
    if from_sql is not None:
        sql_data, text = _sql_file(from_sql)
        assert embedded_url is not None, "--from-sql needs the embedded server's URL"
        found, skipped, left_out = _from_sql(embedded_url, text, str(from_sql), tables, limits)
        database = {"source": "sql", "sql_file": from_sql.name, "schema": data_schema(desk)}
        if limits != DEFAULT_LIMITS:
            database |= {"load_statement_seconds": limits.statement_seconds, "load_seconds": limits.total_seconds}
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
        documents=list(docs.documents),
        database=database,
        knowledge_paths=[root.resolve().name for root in kb],
    )
    text = render(data)
    parent = directory.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.init-", dir=parent))
    try:
        _copy_in(staging, from_sql.name if from_sql is not None else None, sql_data, docs)
        (staging / CONFIG_FILE).write_text(text, encoding="utf-8")
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
    return InitResult(
        directory,
        config,
        tuple(found),
        docs.documents,
        tuple(skipped),
        private,
        left_out,
        tuple(names),
        docs.skipped,
    )
