"""A small stdio MCP server for the technique tests, built with the official SDK's server API.

Run as ``python tests/technique/mcp_demo_server.py [CALL_LOG]``; it speaks MCP on stdin/stdout. With a
``CALL_LOG`` path, every tool call appends one JSON line (the tool's name and its arguments) to that file
before it runs: the tests read it to see, from outside the dispatcher, which calls reached the server.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("demo", log_level="CRITICAL")
CALL_LOG = sys.argv[1] if len(sys.argv) > 1 else None


def _record(tool: str, **arguments: object) -> None:
    if CALL_LOG:
        with open(CALL_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    _record("add", a=a, b=b)
    return a + b


@app.tool()
def greet(name: str, punctuation: str = "!") -> str:
    """Greet someone."""
    _record("greet", name=name, punctuation=punctuation)
    return f"Hello, {name}{punctuation}"


@app.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    _record("fail", reason=reason)
    raise ValueError(reason)


@app.tool()
async def slow(seconds: float) -> str:
    """Answers after a delay."""
    _record("slow", seconds=seconds)
    await asyncio.sleep(seconds)
    return "done"


@app.tool()
def echo(payload: dict) -> str:  # type: ignore[type-arg]  # any JSON object, on purpose
    """Echoes a nested JSON object back (the tests send it deep nesting)."""
    _record("echo", payload=payload)
    return json.dumps(payload)


if __name__ == "__main__":
    app.run("stdio")
