"""A small stdio MCP server for the technique tests, built with the official SDK's server API.

Run as ``python tests/technique/mcp_demo_server.py``; it speaks MCP on stdin/stdout.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import MCPServer

app = MCPServer("demo", log_level="CRITICAL")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def greet(name: str, punctuation: str = "!") -> str:
    """Greet someone."""
    return f"Hello, {name}{punctuation}"


@app.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ValueError(reason)


@app.tool()
async def slow(seconds: float) -> str:
    """Answers after a delay."""
    await asyncio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    app.run("stdio")
