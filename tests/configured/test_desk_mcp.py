"""MCP servers as tools from desk.toml: a route of kind "tool" whose tool names an ``[[mcp_servers]]`` entry calls
it through the MCP pool, behind the gateway; arguments that do not fit the tool's ``inputSchema`` never reach the
server. The server is the stdio test server of the technique tests (it logs every call it receives)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from routegate.apps.configured.config import DeskConfigError, parse_config
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import ROOT

DEMO_SERVER = ROOT / "tests" / "technique" / "mcp_demo_server.py"

MCP = """
[[mcp_servers]]
name = "demo"
command = {python}
args = [{server}, {log}]

[[tools]]
name = "adder"
description = "adds two numbers"
mcp_server = "demo"
mcp_tool = "add"
args = {{ a = "integer", b = "integer" }}
answer = "The sum is {{result}}."

[[tools]]
name = "greeter"
description = "greets by name"
mcp_server = "demo"
mcp_tool = "greet"
args = {{ name = "integer" }}

[[routes]]
name = "sums"
kind = "tool"
target = "adder"
keywords = ["add", "sum"]
examples = ["add 2 and 3", "what is the sum of 4 and 5"]

[[routes]]
name = "greetings"
kind = "tool"
target = "greeter"
keywords = ["greet"]
examples = ["greet 7"]
"""


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


@pytest.fixture
def mcp_desk(shop_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "base"
    shutil.copytree(shop_dir.parent, base, ignore=shutil.ignore_patterns(".*"))
    config = base / shop_dir.name / "desk.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('name = "shop"', 'name = "shopmcp"').replace('schema = "desk_shop"', 'schema = "desk_shopmcp"')
    log = tmp_path / "calls.jsonl"
    quoted = {k: json.dumps(str(v)) for k, v in {"python": sys.executable, "server": DEMO_SERVER, "log": log}.items()}
    config.write_text(text + MCP.format(**quoted), encoding="utf-8")
    return base / shop_dir.name, log


async def test_an_mcp_tool_is_called_with_the_arguments_of_the_message(
    mcp_desk: tuple[Path, Path], pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    desk_dir, log = mcp_desk
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, desk_dir, encoder=encoder) as desk:
        result = await desk.ask("Please add 2 and 3", session_id="mcp-1")
        assert (result.route, result.stop_reason, result.answer) == ("EXTERNAL", "success", "The sum is 5.")
        tool = next(t for t in result.notes if t.get("node") == "external")
        assert tool["call"] == {"tool": "adder", "args": {"a": 2, "b": 3}, "url": "mcp:demo/add", "mock": False}
        assert _calls(log) == [{"tool": "add", "arguments": {"a": 2, "b": 3}}]
        # the other routes still work next to the MCP tool
        assert (await desk.ask("What is the status of order 1041?", session_id="mcp-1")).route == "POSTGRES"


async def test_arguments_the_input_schema_refuses_never_reach_the_server(
    mcp_desk: tuple[Path, Path], pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    desk_dir, log = mcp_desk
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, desk_dir, encoder=encoder) as desk:
        result = await desk.ask("greet 42", session_id="mcp-2")  # greet's name is a string; the desk sends 42
    assert result.route == "EXTERNAL" and result.fallback == "tool_error:invalid_arguments"
    assert result.stop_reason.startswith("unanswered:tool_error:invalid_arguments")
    assert _calls(log) == []


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (
            'name = "t"\ndescription = "d"\nurl = "https://x.example/a"\nmcp_server = "demo"',
            "tools[0] (name = 't'): tool 't' needs exactly one of url = ... (an HTTP tool) or mcp_server = ...",
        ),
        (
            'name = "t"\ndescription = "d"\nmcp_server = "elsewhere"',
            "tools[0] (name = 't').mcp_server: 'elsewhere' is not one of [[mcp_servers]] ['demo']",
        ),
    ],
)
def test_a_wrong_mcp_tool_is_refused_naming_the_field(tool: str, message: str, tmp_path: Path) -> None:
    text = (
        '[desk]\nname = "m"\n[database]\nsource = "url"\nschema = "shop"\n'
        '[[mcp_servers]]\nname = "demo"\ncommand = "python"\n'
        f'[[tools]]\n{tool}\n[[routes]]\nname = "chat"\nkind = "llm"\n'
    )
    with pytest.raises(DeskConfigError) as raised:
        parse_config(text, tmp_path / "desk.toml")
    assert message in str(raised.value)
