"""``routegate desk init`` and ``routegate kb ingest``: your own desk from a SQL file (or a PostgreSQL) and a
docs folder, and its knowledge base. ``--desk DIR`` (or ``ROUTEGATE_DESK``) on ``ask``, ``chat`` and ``route``
runs it (:func:`routegate.apps.support.factory.open_support_desk`, :func:`desk_router`).

Wiring only: the work is in :mod:`routegate.apps.configured`.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate.cli._command import add_command
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.apps.configured.init import InitResult
    from routegate.apps.support.router import SupportRouter

DESK_HELP = "run your own desk: the directory desk init wrote (also ROUTEGATE_DESK)"
LABELLED_HELP = (
    'one JSON object per line: {"text": "<a question>", "route": "POSTGRES" | "VECTOR" | "EXTERNAL" | "LLM"}'
)


def register(subparsers: Any) -> None:
    desk: argparse.ArgumentParser = subparsers.add_parser(
        "desk",
        help="your own desk: `desk init DIR --from-sql SCHEMA.sql --kb DOCS/` writes DIR/desk.toml; `desk check DIR`",
        description="Create a desk configuration from your tables and documents (docs/desk.md).",
    )
    actions = desk.add_subparsers(title="desk commands", metavar="ACTION", required=True)
    init = add_command(actions, "init", run_init)
    init.add_argument("directory", type=Path, help="the desk's directory (created)")
    source = init.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from-sql", type=Path, help="a SQL file: CREATE TABLE and INSERT statements, or a plain pg_dump file"
    )
    source.add_argument("--database-url", help="an existing PostgreSQL to read the tables from")
    init.add_argument("--schema", default="public", help="with --database-url: the schema of the tables (public)")
    init.add_argument("--kb", type=Path, action="append", default=[], help="a docs folder or file (repeatable)")
    init.add_argument("--tables", help="comma-separated tables the desk may read (default: every table)")
    init.add_argument("--name", help="the desk's name (default: the directory's name)")
    init.add_argument(
        "--load-statement-seconds",
        type=float,
        default=None,
        help="with --from-sql: the longest one batch of statements (or one COPY) may run (default 10)",
    )
    init.add_argument(
        "--load-seconds", type=float, default=None, help="with --from-sql: the longest the whole file may take (120)"
    )
    check = add_command(actions, "check", run_check)
    check.add_argument("directory", type=Path, help="the desk's directory")
    evaluate = add_command(actions, "eval", run_eval)
    evaluate.add_argument("directory", type=Path, help="the desk's directory")
    evaluate.add_argument("file", type=Path, help=f"labelled questions, {LABELLED_HELP}")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")

    kb: argparse.ArgumentParser = subparsers.add_parser(
        "kb", help="the knowledge base of your own desk: `kb ingest --desk DIR`"
    )
    kb_actions = kb.add_subparsers(title="kb commands", metavar="ACTION", required=True)
    ingest = add_command(kb_actions, "ingest", run_ingest)
    ingest.add_argument("--desk", type=Path, default=None, help=DESK_HELP)


def run_init(args: argparse.Namespace) -> int:
    """introspect a SQL file or a PostgreSQL and a docs folder; write DIR/desk.toml

    Load SCHEMA.sql into a scratch schema of the embedded PostgreSQL, as a role with no rights outside that schema,
    in a transaction that is rolled back (or read --database-url); read the tables, columns, keys and the docs
    folder; copy the SQL file and the documents (regular files only) into DIR and write DIR/desk.toml: routes with
    example questions, the readable tables and columns, the knowledge sources. DIR must not exist or be empty.
    """
    from routegate.apps.configured.init import init_desk
    from routegate.apps.configured.loader import DEFAULT_LIMITS, LoadLimits

    settings = Settings()
    limits = LoadLimits(
        args.load_statement_seconds or DEFAULT_LIMITS.statement_seconds,
        args.load_seconds or DEFAULT_LIMITS.total_seconds,
    )
    tables = [t.strip() for t in args.tables.split(",") if t.strip()] if args.tables else None
    server = None
    url = None
    if args.from_sql is not None:
        from routegate.apps.support.embedded import embedded_server

        if settings.database_url:
            url = settings.database_url
        else:
            server = embedded_server(settings)
            url = server.start()
    try:
        result = init_desk(
            args.directory,
            embedded_url=url,
            from_sql=args.from_sql,
            database_url=args.database_url,
            schema=args.schema,
            kb=args.kb,
            tables=tables,
            name=args.name,
            limits=limits,
        )
    finally:
        if server is not None:
            server.stop()
    print(summary(result))
    return 0


def summary(result: InitResult) -> str:
    from routegate.apps.configured.check import command_lines

    config = result.config
    lines = [f"left out of the SQL file: {result.left_out}"] if result.left_out else []
    lines.append(f"found {len(result.tables)} table(s):")
    for table in result.tables:
        keys = f"primary key {table.primary_key}" if table.primary_key else "no primary key"
        fks = ", ".join(f"{fk.column} -> {fk.references}.{fk.ref_column}" for fk in table.foreign_keys)
        lines.append(f"  {table.name} ({table.rows} rows; {keys}{'; ' + fks if fks else ''})")
    if result.skipped_tables:
        lines.append("skipped (name needs quoting): " + ", ".join(result.skipped_tables))
    if result.private_columns:
        lines.append("left out as private (add them to `columns` to allow): " + ", ".join(result.private_columns))
    lines.append(f"found {len(result.documents)} document(s):")
    lines += [f"  {d.source}: {d.title}" for d in result.documents]
    lines += [f"  not read: {skipped}" for skipped in result.skipped_documents]
    if result.copied:
        lines.append(f"copied into {result.directory}: {', '.join(result.copied)} (desk.toml names them there)")
    lines.append(f"wrote {result.directory / 'desk.toml'} with {len(config.routes)} route(s):")
    for route in config.routes:
        target = ", ".join(route.tables) if route.tables else route.target or route.kind
        lines.append(f"  {route.name} ({route.kind}: {target}) — {len(route.examples)} example questions")
    lines.append("readable: " + "; ".join(f"{t.name}({', '.join(t.columns)})" for t in config.tables))
    lines += command_lines(config, result.directory)
    lines.append("every other table and column is denied. Review the file (remove what must stay private), then:")
    lines.append(f'  routegate ask --desk {result.directory} "..."')
    return "\n".join(lines)


def run_check(args: argparse.Namespace) -> int:
    """say what a desk directory will do before it runs: its SQL file, documents, tools and commands

    Check DIR as a desk start would, without a database: desk.toml, the SQL file (split into statements; one a desk's
    SQL file may not hold is refused with its line), the documents (symbolic links are not followed, and listed).
    Then list what the desk will do: the schema its SQL file is loaded into and the role it runs as, the documents
    it quotes, the URLs its HTTP tools call, and the commands its [[mcp_servers]] run on this machine. A desk
    directory is code, like a Makefile: run only one you trust.
    """
    from routegate.apps.configured.check import desk_report

    print("\n".join(desk_report(args.directory)))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """measure the desk's router on labelled questions (the same as `routegate eval --desk DIR FILE`)

    Route every question of FILE (one JSON object per line: {"text": ..., "route": POSTGRES | VECTOR | EXTERNAL |
    LLM}) with the desk's router (offline stages; no database, no tool) and print the accuracy, per route, and every
    misroute.
    """
    return evaluate_desk(args.directory, args.file, as_json=args.json)


def evaluate_desk(directory: Path, file: Path, *, as_json: bool) -> int:
    """``routegate eval --desk DIR FILE`` and ``routegate desk eval DIR FILE``: the one implementation."""
    import json

    from routegate.apps.configured.evaluate import evaluate, read_labelled

    labelled = read_labelled(file)  # a bad file is said before the encoder loads
    report = asyncio.run(evaluate(desk_router(Settings(), directory), labelled))
    print(json.dumps(report.to_dict(), ensure_ascii=False) if as_json else "\n".join(report.lines()))
    return 0


def with_desk(settings: Settings, given: Path | None) -> Settings:
    """``settings`` with ``--desk`` (when given) in place of ``ROUTEGATE_DESK``."""
    return settings if given is None else settings.model_copy(update={"desk": given})


def run_ingest(args: argparse.Namespace) -> int:
    """chunk and embed the desk's documents into pgvector (only changed files; deleted ones removed)

    Bring the knowledge base in line with the documents of desk.toml's [knowledge] paths: new and changed files (by
    content hash) are chunked and embedded, deleted files removed.
    """
    from routegate.errors import ConfigurationError

    settings = Settings()
    where = with_desk(settings, args.desk).desk
    if where is None:
        raise ConfigurationError("kb ingest needs --desk DIR (or ROUTEGATE_DESK): the desk whose documents to ingest")
    return asyncio.run(_ingest(settings, where))


async def _ingest(settings: Settings, where: Path) -> int:
    from routegate.apps.configured.kb import ingest
    from routegate.apps.support.factory import open_support_desk

    async with open_support_desk(settings, where, ingest_on_start=False) as desk:
        report = await ingest(desk.config, desk.desk_dir, desk.db, desk.encoder)
    for label, sources in (("added", report.added), ("updated", report.updated), ("removed", report.removed)):
        for source in sources:
            print(f"{label}: {source}")
    for skipped in report.skipped:
        print(f"not read: {skipped}")
    print(f"knowledge base of {where}: {report.summary()}")
    return 0


def desk_router(settings: Settings, where: Path) -> SupportRouter:
    """The configured desk's router alone (``route --desk``: no database, no tool)."""
    from routegate.apps.support.routing import desk_router as router_of

    return router_of(settings, where)
