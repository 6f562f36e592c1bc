"""Tool calls against a real stdio MCP server (tests/technique/mcp_demo_server.py) through the official SDK."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from routegate.core import Budget, WorkerArgs
from routegate.errors import ConfigurationError
from routegate.technique import TechniqueDispatcher, TechniqueRouter
from routegate.technique.tools import MCPServerConfig, MCPToolHandler, MCPToolPool, ToolOutcome
from routegate.technique.types import ToolCallRequest

SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))
DEMO = MCPServerConfig("demo", command=sys.executable, args=(SERVER,), call_timeout=10)
ROUTER = TechniqueRouter()


class AddArgs(WorkerArgs):
    a: int
    b: int


async def test_pool_calls_a_real_server() -> None:
    async with MCPToolPool([DEMO]) as pool:
        added = await pool.call("demo", "add", {"a": 2, "b": 40})
        assert (added.stop_reason, added.text, added.structured) == ("success", "42", {"result": 42})
        greeted = await pool.call("demo", "greet", {"name": "Anna"})
        assert greeted.text == "Hello, Anna!"
        failed = await pool.call("demo", "fail", {"reason": "disk full"})
        assert failed.stop_reason == "tool_error:mcp:demo/fail"
        unknown = await pool.call("demo", "nope", {})
        assert unknown.stop_reason == "tool_error:mcp:demo/nope"
        assert "Unknown tool" in unknown.message
        bad_args = await pool.call("demo", "add", {"a": "x"})
        assert bad_args.stop_reason == "tool_error:mcp:demo/add"
        missing = await pool.call("other", "add", {})
        assert missing.stop_reason == "tool_unavailable:other"


async def test_dispatch_tool_calls_through_the_policy() -> None:
    async with MCPToolPool([DEMO]) as pool:
        dispatcher = TechniqueDispatcher(
            handlers=[MCPToolHandler(pool)],
            allow=["mcp:demo/add", "mcp:demo/greet"],
            schemas={"mcp:demo/add": AddArgs},
            budget=Budget(max_delegations=5),
        )
        text = (
            "Let me compute both.\n"
            '<tool_call>\n{"name": "demo.add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
            '<tool_call>\n{"name": "greet", "arguments": {"name": "Ben"}}\n</tool_call>'
        )
        result = await dispatcher.adispatch(ROUTER.classify(text))
        assert result.ok, result
        values = [outcome.value for outcome in result.output]
        assert all(isinstance(value, ToolOutcome) for value in values)
        assert [value.text for value in values if isinstance(value, ToolOutcome)] == ["3", "Hello, Ben!"]

        refused = await dispatcher.adispatch(ROUTER.classify('{"name": "demo.fail", "arguments": {"reason": "x"}}'))
        assert (refused.stop_reason, refused.phase) == ("invalid_route:route_not_allowed:mcp:demo/fail", "route")

        bad = await dispatcher.adispatch(ROUTER.classify('{"name": "demo.add", "arguments": {"a": 1}}'))
        assert bad.stop_reason == "invalid_route:missing_b"


async def test_unavailable_server_and_timeouts() -> None:
    ghost = MCPServerConfig("ghost", command="/nonexistent/mcp-server", connect_timeout=5)
    quick = MCPServerConfig("demo", command=sys.executable, args=(SERVER,), call_timeout=0.5)
    async with MCPToolPool([ghost, quick]) as pool:
        down = await pool.call("ghost", "anything", {})
        assert down.stop_reason == "tool_unavailable:ghost"
        assert down.message.startswith("starting MCP server 'ghost' raised ")  # its class only
        assert down.message.endswith(" (details in the log)") and "nonexistent" not in down.message
        late = await pool.call("demo", "slow", {"seconds": 5})
        assert late.stop_reason == "tool_timeout:mcp:demo/slow"


def test_handler_targets() -> None:
    one = MCPToolHandler(MCPToolPool([DEMO]))
    assert one.route(ToolCallRequest("", "add", {"a": 1})) == ("mcp:demo/add", {"a": 1})
    assert one.route(ToolCallRequest("github", "list_issues")) == ("mcp:github/list_issues", {})
    two = MCPToolHandler(MCPToolPool([DEMO, MCPServerConfig("docs", url="http://127.0.0.1:1/mcp")]))
    assert two.route(ToolCallRequest("", "add")) == ("mcp:add", {})
    assert MCPToolHandler(two.pool, default_server="docs").route(ToolCallRequest("", "find"))[0] == "mcp:docs/find"
    assert one.worker("mcp:demo/add") is not None
    assert one.worker("mcp:github/list_issues") is None
    assert one.worker("mcp:demo") is None


def test_server_config_is_validated() -> None:
    with pytest.raises(ConfigurationError, match="exactly one of command= or url="):
        MCPServerConfig("x")
    with pytest.raises(ConfigurationError, match="server name"):
        MCPServerConfig("bad name", command="x")
    with pytest.raises(ConfigurationError, match="call_timeout"):
        MCPServerConfig("x", command="x", call_timeout=0)
    with pytest.raises(ConfigurationError, match="two MCP servers"):
        MCPToolPool([DEMO, DEMO])
