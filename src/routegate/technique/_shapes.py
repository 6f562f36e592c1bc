"""JSON shapes recognised as tool calls and A2A requests. All-or-nothing: one bad entry rejects the block.

Each parser returns the extracted requests, or a short reason why the value is not one (for
``ClassifiedOutput.problems``). Unknown keys are refused, so ordinary JSON data that happens to have a
``name`` field is not mistaken for a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from routegate.core.messages import MAX_REQUEST_CHARS
from routegate.technique.types import A2ARoutingRequest, ToolCallRequest

MAX_ITEMS = 64
MAX_TASK_CHARS = MAX_REQUEST_CHARS  # a delegated task becomes the receiving agent's goal: the goal's bound
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_AGENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-@]{0,127}")

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type", "call_id", "index"})
_EXPLICIT_KEYS = frozenset({"server", "method", "tool", "arguments", "params", "id", "type"})
_OPENAI_KEYS = frozenset({"type", "function", "id", "index"})
_FUNCTION_KEYS = frozenset({"name", "arguments"})
_MESSAGE_KEYS = frozenset({"tool_calls", "function_call", "role", "content"})
_A2A_KEYS = frozenset({"target_agent", "agent", "to", "task_description", "task", "context", "type", "id"})
_A2A_TYPES = frozenset({"a2a_request", "a2a", "delegate", "delegation"})


class ShapeError(ValueError):
    """The value is not the expected shape; the message says why."""


def loads(text: str) -> object:
    """Parse JSON, turning every failure (depth included) into :class:`ShapeError`."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ShapeError("JSON nested too deeply") from None
    except ValueError as exc:
        raise ShapeError(f"invalid JSON ({str(exc).split(':', 1)[0]})") from None


def _entries(value: object, what: str) -> list[object]:
    entries = value if isinstance(value, list) else [value]
    if not entries:
        raise ShapeError(f"empty list of {what}")
    if len(entries) > MAX_ITEMS:
        raise ShapeError(f"{len(entries)} {what} in one block, over the limit of {MAX_ITEMS}")
    return entries


def _arguments(value: object, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):  # OpenAI encodes function arguments as a JSON string
        value = loads(value) if value.strip() else {}
    if not isinstance(value, dict):
        raise ShapeError(f"{where}: arguments must be a JSON object, got {type(value).__name__}")
    return value


def _name(value: object, what: str, pattern: re.Pattern[str] = _NAME) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        shown = value if isinstance(value, str) else type(value).__name__
        raise ShapeError(f"{what} {str(shown)[:40]!r} is not a valid name")
    return value


def split_tool_name(name: str) -> tuple[str, str]:
    """``mcp__server__tool``, ``server/tool`` and ``server.tool`` name a server; a bare ``tool`` does not."""
    if name.startswith("mcp__"):
        server, sep, method = name[5:].partition("__")
        if sep and server and method:
            return server, method
    for sep in ("/", "."):
        server, found, method = name.partition(sep)
        if found and server and method:
            return server, method
    return "", name


def _named_call(name: object, arguments: object) -> ToolCallRequest:
    if not isinstance(name, str) or not name:
        raise ShapeError("a tool call's 'name' must be a non-empty string")
    server, method = split_tool_name(name)
    if server:
        _name(server, "server")
    _name(method, "tool")
    return ToolCallRequest(server, method, _arguments(arguments, f"tool {name[:40]!r}"))


def _one_call(entry: object) -> list[ToolCallRequest]:
    if not isinstance(entry, dict):
        raise ShapeError(f"a tool call must be a JSON object, got {type(entry).__name__}")
    keys = entry.keys()
    if "tool_calls" in keys or "function_call" in keys:
        if keys - _MESSAGE_KEYS:
            raise ShapeError(f"unexpected keys {sorted(keys - _MESSAGE_KEYS)[:5]} next to tool_calls")
        if "tool_calls" in keys:
            return tool_calls_from(entry["tool_calls"])
        return _one_call(entry["function_call"])
    if "function" in keys:
        if keys - _OPENAI_KEYS:
            raise ShapeError(f"unexpected keys {sorted(keys - _OPENAI_KEYS)[:5]} in a function tool call")
        function = entry["function"]
        if not isinstance(function, dict) or function.keys() - _FUNCTION_KEYS or "name" not in function:
            raise ShapeError("'function' must be an object with 'name' and 'arguments'")
        if "arguments" not in function:
            raise ShapeError("'function' has no 'arguments'")
        return [_named_call(function["name"], function["arguments"])]
    if "server" in keys:
        if keys - _EXPLICIT_KEYS:
            raise ShapeError(f"unexpected keys {sorted(keys - _EXPLICIT_KEYS)[:5]} in a server tool call")
        if ("method" in keys) == ("tool" in keys):
            raise ShapeError("a server tool call needs exactly one of 'method' or 'tool'")
        if "arguments" in keys and "params" in keys:
            raise ShapeError("a server tool call has both 'arguments' and 'params'")
        server = _name(entry["server"], "server")
        method = _name(entry.get("method", entry.get("tool")), "tool")
        arguments = entry.get("arguments", entry.get("params"))
        return [ToolCallRequest(server, method, _arguments(arguments, f"tool {server}/{method}"))]
    if "name" in keys:
        if keys - _CALL_KEYS:
            raise ShapeError(f"unexpected keys {sorted(keys - _CALL_KEYS)[:5]} in a tool call")
        if ("arguments" in keys) == ("parameters" in keys):
            raise ShapeError("a tool call needs exactly one of 'arguments' or 'parameters'")
        return [_named_call(entry["name"], entry.get("arguments", entry.get("parameters")))]
    raise ShapeError("no 'name', 'function', 'server' or 'tool_calls' key")


def tool_calls_from(value: object) -> list[ToolCallRequest]:
    """Tool calls from one parsed JSON value: a call object, a message with ``tool_calls``, or a list."""
    calls: list[ToolCallRequest] = []
    for entry in _entries(value, "tool calls"):
        calls.extend(_one_call(entry))
    if len(calls) > MAX_ITEMS:
        raise ShapeError(f"{len(calls)} tool calls in one block, over the limit of {MAX_ITEMS}")
    return calls


def _one_request(entry: object, *, strict: bool) -> A2ARoutingRequest:
    if not isinstance(entry, dict):
        raise ShapeError(f"an A2A request must be a JSON object, got {type(entry).__name__}")
    keys = entry.keys()
    if keys - _A2A_KEYS:
        raise ShapeError(f"unexpected keys {sorted(keys - _A2A_KEYS)[:5]} in an A2A request")
    targets = [key for key in ("target_agent", "agent", "to") if key in keys]
    tasks = [key for key in ("task_description", "task") if key in keys]
    if strict and "target_agent" not in keys:
        raise ShapeError("no 'target_agent' key")
    if len(targets) != 1 or len(tasks) != 1:
        raise ShapeError("an A2A request needs one target ('target_agent') and one task ('task_description')")
    kind = entry.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in _A2A_TYPES):
        raise ShapeError(f"'type' {str(kind)[:40]!r} is not an A2A request type")
    agent = _name(entry[targets[0]], "target agent", _AGENT)
    task = entry[tasks[0]]
    if not isinstance(task, str) or not task.strip():
        raise ShapeError(f"A2A request to {agent!r} has no task description")
    if len(task) > MAX_TASK_CHARS:
        raise ShapeError(f"A2A task description is {len(task)} characters, over {MAX_TASK_CHARS}")
    context = entry.get("context")
    if context is None:
        context = {}
    if not isinstance(context, Mapping):
        raise ShapeError(f"A2A context must be a JSON object, got {type(context).__name__}")
    return A2ARoutingRequest(agent, task.strip(), dict(context))


def a2a_requests_from(value: object, *, strict: bool = False) -> list[A2ARoutingRequest]:
    """A2A requests from one parsed JSON value (an object or a list). ``strict`` demands ``target_agent``."""
    return [_one_request(entry, strict=strict) for entry in _entries(value, "A2A requests")]
