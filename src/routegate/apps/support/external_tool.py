"""Tools from the configuration: one call each, its arguments taken from the message and checked against the tool's
``args`` (``string`` / ``integer``).

* An HTTP tool fills its URL from them and sends one request; ``timeout_seconds`` bounds the whole exchange, and
  at most :data:`MAX_RESPONSE_BYTES` of the answer are read (a longer one is cut while it streams in, and says so;
  a compressed one is not read: it is asked for uncompressed).
* An MCP tool (``mcp_server``) goes through the shared :class:`~routegate.technique.MCPToolPool`: the arguments
  are checked against the tool's ``inputSchema`` (as the server lists it) before anything is sent, then the call is
  bounded by the server's ``call_timeout_seconds``.

A tool with a ``mock`` answers with it and calls nothing (offline demos, tests)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from routegate.apps.configured.config import ToolConfig
from routegate.apps.support.errors import ToolError

if TYPE_CHECKING:
    from routegate.technique.tools import MCPToolPool

MAX_RESPONSE_BYTES: Final = 64 * 1024
"""What an HTTP tool reads of an answer: the rest is not received (the answer is cut, and says so)."""
_IDENTITY: Final = {"accept-encoding": "identity"}
_CODE: Final = re.compile(r"\b[A-Za-z]{0,6}-?\d[\w-]{2,}\b")
_NUMBER: Final = re.compile(r"\b\d{1,12}\b")


@dataclass(frozen=True, slots=True)
class ToolCall:
    tool: str
    args: Mapping[str, Any]
    url: str


def arguments(tool: ToolConfig, message: str) -> dict[str, Any] | None:
    """The tool's arguments found in ``message`` (``None`` when one is missing): an ``integer`` is a number in it,
    a ``string`` a code-like word (letters and digits, ``TRK-5501``), else the last capitalised word."""
    out: dict[str, Any] = {}
    numbers = _NUMBER.findall(message)
    codes = [c for c in _CODE.findall(message) if not c.isdigit()]
    for name, kind in tool.args.items():
        if kind == "integer":
            if not numbers:
                return None
            out[name] = int(numbers.pop(0))
        else:
            if codes:
                out[name] = codes.pop(0)
            else:
                capitalised = re.findall(r"\b[A-Z][\w-]+\b", message)[1:]
                if not capitalised:
                    return None
                out[name] = capitalised[-1]
    return out


def call_of(tool: ToolConfig, args: Mapping[str, Any]) -> ToolCall:
    """The call as recorded in the trace: an HTTP tool's URL filled in, an MCP tool's ``mcp:<server>/<tool>``."""
    if tool.url is None:
        return ToolCall(tool.name, dict(args), f"mcp:{tool.mcp_server}/{tool.mcp_tool or tool.name}")
    url = tool.url
    for name, value in args.items():
        url = url.replace("{" + name + "}", quote(str(value), safe=""))
    return ToolCall(tool.name, dict(args), url)


async def run_tool(tool: ToolConfig, call: ToolCall, *, mcp: MCPToolPool | None = None) -> dict[str, Any]:
    """The tool's answer: ``{"tool", "response", "mock"}``; :class:`ToolError` when the call fails or (MCP) its
    arguments do not fit the tool's ``inputSchema``."""
    if tool.mock is not None:
        return {"tool": tool.name, "response": tool.mock, "mock": True}
    if tool.mcp_server is not None:
        return await _run_mcp(tool, call, mcp)
    return await _run_http(tool, call)


async def _run_http(tool: ToolConfig, call: ToolCall) -> dict[str, Any]:
    import httpx  # only when an HTTP tool is called: a desk whose tools are mocks (the built-in one) never loads it

    assert tool.url is not None  # one of url / mcp_server (config)
    query = {k: v for k, v in call.args.items() if "{" + k + "}" not in tool.url}
    sent: dict[str, Any] = {"params": query} if tool.method == "GET" else {"json": query}
    try:
        # one deadline for the whole exchange (httpx's timeout bounds each read, not a slow drip of many)
        async with asyncio.timeout(tool.timeout_seconds):
            async with (
                httpx.AsyncClient(timeout=tool.timeout_seconds, follow_redirects=False) as client,
                client.stream(tool.method, call.url, headers=_IDENTITY, **sent) as response,
            ):
                if response.status_code >= 400:
                    raise ToolError("http_error", f"{tool.name} answered HTTP {response.status_code}")
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise ToolError(
                        "http_error",
                        f"{tool.name} answered with Content-Encoding {encoding[:40]!r} although asked for an "
                        "uncompressed answer (a compressed answer is not read: it could expand past the "
                        f"{MAX_RESPONSE_BYTES} bytes the tool reads)",
                    )
                body, cut = await _read_at_most(response.aiter_raw(), MAX_RESPONSE_BYTES)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise ToolError("timeout", f"{tool.name} did not answer within {tool.timeout_seconds:g} s") from exc
    except httpx.HTTPError as exc:
        raise ToolError("http_error", f"{tool.name} failed: {type(exc).__name__}") from exc
    if cut:
        return {
            "tool": tool.name,
            "response": body.decode(errors="replace"),
            "mock": False,
            "truncated": True,
            "truncation": f"the tool's answer was cut at {MAX_RESPONSE_BYTES} bytes",
        }
    try:
        value: Any = json.loads(body)
    except ValueError:
        value = body.decode(errors="replace")
    return {"tool": tool.name, "response": value, "mock": False}


async def _read_at_most(chunks: AsyncIterator[bytes], limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of a body, and whether there was more: reading stops there (the rest is never
    received into memory; the connection is closed with the response)."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk[: limit + 1 - len(body)]
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


async def _run_mcp(tool: ToolConfig, call: ToolCall, mcp: MCPToolPool | None) -> dict[str, Any]:
    server, method = str(tool.mcp_server), tool.mcp_tool or tool.name
    if mcp is None:
        raise ToolError("unavailable", f"{tool.name}: no MCP pool was given to the desk for server {server!r}")
    refused = await mcp.check_arguments(server, method, call.args)
    if refused is not None:
        code = "unavailable" if refused.stop_reason.startswith("tool_unavailable") else "invalid_arguments"
        raise ToolError(code, f"{tool.name}: {refused.message}")
    outcome = await mcp.call(server, method, call.args)
    if not outcome.ok:
        kind = outcome.stop_reason.split(":", 1)[0]
        code = {"tool_timeout": "timeout", "tool_unavailable": "unavailable"}.get(kind, "mcp_error")
        raise ToolError(code, f"{tool.name}: {outcome.message or outcome.stop_reason}")
    response = outcome.structured if outcome.structured is not None else outcome.text
    return {"tool": tool.name, "response": response, "mock": False}
