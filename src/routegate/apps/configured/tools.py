"""HTTP tools from the configuration: one request per call, its arguments taken from the message and checked
against the tool's ``args`` (``string`` / ``integer``), its URL filled from them, bounded by ``timeout_seconds``.
A tool with a ``mock`` answers with it and never calls the URL (offline demos, tests)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx

from routegate.apps.configured.config import ToolConfig
from routegate.apps.support.errors import ToolError

MAX_RESPONSE_BYTES: Final = 64 * 1024
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
    url = tool.url
    for name, value in args.items():
        url = url.replace("{" + name + "}", quote(str(value), safe=""))
    return ToolCall(tool.name, dict(args), url)


async def run_tool(tool: ToolConfig, call: ToolCall) -> dict[str, Any]:
    """The tool's answer: ``{"tool", "response", "mock"}``; :class:`ToolError` when the request fails."""
    if tool.mock is not None:
        return {"tool": tool.name, "response": tool.mock, "mock": True}
    query = {k: v for k, v in call.args.items() if "{" + k + "}" not in tool.url}
    try:
        async with httpx.AsyncClient(timeout=tool.timeout_seconds, follow_redirects=False) as client:
            if tool.method == "GET":
                response = await client.get(call.url, params=query)
            else:
                response = await client.post(call.url, json=query)
    except httpx.TimeoutException as exc:
        raise ToolError("timeout", f"{tool.name} did not answer within {tool.timeout_seconds:g} s") from exc
    except httpx.HTTPError as exc:
        raise ToolError("http_error", f"{tool.name} failed: {type(exc).__name__}") from exc
    if response.status_code >= 400:
        raise ToolError("http_error", f"{tool.name} answered HTTP {response.status_code}")
    body = response.content[:MAX_RESPONSE_BYTES]
    try:
        value: Any = response.json() if len(response.content) <= MAX_RESPONSE_BYTES else body.decode(errors="replace")
    except ValueError:
        value = body.decode(errors="replace")
    return {"tool": tool.name, "response": value, "mock": False}
