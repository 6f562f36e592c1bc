"""``routegate desk check DIR``: what a desk directory will do, said before anything of it runs.

A desk directory is code, like a Makefile: its SQL file runs in the database (as a role with no rights outside the
desk's schema), its documents are read and quoted to anyone who chats with the desk, its HTTP tools call URLs,
and its ``[[mcp_servers]]`` commands run programs on this machine. :func:`desk_report` checks the directory as a
start would — ``desk.toml``, the SQL file read and split (a statement a desk's SQL file may not hold is refused
with its line), the documents (symbolic links passed by) — without a database, and lists each of those.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from routegate.apps.configured.config import DeskConfig, desk_path, load_config
from routegate.apps.configured.database import owner_role, sql_source, state_schema
from routegate.apps.configured.documents import read_documents
from routegate.apps.configured.script import parse_script


def command_lines(config: DeskConfig, directory: Path) -> list[str]:
    """The programs the desk runs on this machine (its ``[[mcp_servers]]`` commands) and the MCP servers it calls."""
    commands = [m for m in config.mcp_servers if m.command is not None]
    lines = [f"commands it runs on this machine: {'none' if not commands else ''}".rstrip()]
    for server in commands:
        env = f"; env: {', '.join(sorted(server.env))}" if server.env else ""
        line = shlex.join([str(server.command), *server.args])
        lines.append(f"  {server.name}: {line} (in {directory.resolve()}{env}; started at its tool's first call)")
    lines += [f"MCP server {m.name} over HTTP: {m.url}" for m in config.mcp_servers if m.url is not None]
    return lines


def desk_report(directory: Path) -> list[str]:
    """The desk at ``directory``, checked as a start checks it (without a database), said line by line."""
    config = load_config(directory)
    lines = [f"desk {config.desk.name} ({directory}):"]
    database = config.database
    source = sql_source(config, directory)
    if source is not None:
        script = parse_script(source[0], source=f"database.sql_file {database.sql_file}")
        left_out = f"; left out: {script.skipped_summary()}" if script.skipped else ""
        lines.append(
            f"tables: {database.sql_file} ({len(script.statements)} statements{left_out}), loaded into schema "
            f"{database.schema_name} as role {owner_role(config)}, which may reach nothing outside it"
        )
    else:
        lines.append(f"tables: schema {database.schema_name} of DATABASE_URL, only read")
    lines.append(f"state (conversations, knowledge base): schema {state_schema(config)}")
    lines.append("readable: " + ("; ".join(f"{t.name}({', '.join(t.columns)})" for t in config.tables) or "nothing"))
    paths = config.knowledge.paths
    found = read_documents([desk_path(directory, p, f"knowledge.paths[{i}]") for i, p in enumerate(paths)])
    lines.append(f"documents: {len(found.documents)} in {', '.join(paths) or '(none)'}, quoted to anyone who chats")
    lines += [f"  not read: {skipped}" for skipped in found.skipped]
    for tool in config.tools:
        if tool.url is not None:
            offline = " (answered offline by its mock)" if tool.mock is not None else ""
            lines.append(f"HTTP tool {tool.name}: {tool.method} {tool.url}{offline}")
    lines += command_lines(config, directory)
    return lines
