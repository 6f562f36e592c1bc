"""HTTP tools from desk.toml: a route of kind "tool" calls its tool behind the gateway — the mock offline, the URL
(a loopback server here) otherwise — with the arguments found in the message."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from flood_server import FloodServer, kernel_slack
from routegate.apps.support.answers import MAX_QUOTED_CHARS
from routegate.apps.support.contracts import TurnResult
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.external_tool import MAX_RESPONSE_BYTES
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

TOOL = """
[[tools]]
name = "shipping_status"
description = "where a parcel is, by its tracking number"
method = "GET"
url = "{url}"
args = {{ tracking = "string" }}
{mock}

[[routes]]
name = "tracking"
kind = "tool"
target = "shipping_status"
keywords = ["parcel", "tracking number", "carrier"]
examples = ["where is my parcel TRK-5501", "track parcel TRK-5502", "carrier status of TRK-5503"]
"""


class _Carrier(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        body = json.dumps({"status": "at the depot", "path": self.path}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def carrier() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Carrier)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()
    server.server_close()


def _with_tool(shop_dir: Path, tmp_path: Path, url: str, mock: str) -> Path:
    base = tmp_path / "base"
    shutil.copytree(shop_dir.parent, base, ignore=shutil.ignore_patterns(".*"))
    config = base / shop_dir.name / "desk.toml"
    text = config.read_text(encoding="utf-8")
    text = text.replace('name = "shop"', 'name = "shoptools"').replace(
        'schema = "desk_shop"', 'schema = "desk_shoptools"'
    )
    config.write_text(text + TOOL.format(url=url, mock=mock), encoding="utf-8")
    return base / shop_dir.name


@asynccontextmanager
async def _open(desk_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder) -> AsyncIterator[SupportAgent]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, desk_dir, encoder=encoder) as desk:
        yield desk


async def test_a_mocked_tool_answers_offline(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    desk_dir = _with_tool(
        shop_dir, tmp_path, "https://carrier.example/track/{tracking}", 'mock = { status = "in transit" }'
    )
    async with _open(desk_dir, pg_url, tmp_path, encoder) as desk:
        result = await desk.ask("Where is my parcel TRK-5502?", session_id="tool-1")
        assert result.route == "EXTERNAL" and result.stop_reason == "success"
        tool = next(t for t in result.notes if t.get("node") == "external")
        assert tool["call"] == {
            "tool": "shipping_status",
            "args": {"tracking": "TRK-5502"},
            "url": "https://carrier.example/track/TRK-5502",
            "mock": True,
        }
        assert result.answer == 'shipping_status: {"status": "in transit"} (mock response)'
        # the other routes still work next to the tool
        assert (await desk.ask("What is the status of order 1041?", session_id="tool-1")).route == "POSTGRES"


async def test_a_tool_calls_its_url(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder, carrier: str
) -> None:
    desk_dir = _with_tool(shop_dir, tmp_path, carrier + "/track/{tracking}", "")
    async with _open(desk_dir, pg_url, tmp_path, encoder) as desk:
        result = await desk.ask("carrier status of TRK-5505 please", session_id="tool-2")
        assert result.route == "EXTERNAL"
        assert _Carrier.seen[-1] == "/track/TRK-5505"
        assert "at the depot" in result.answer and "mock" not in result.answer
        missing = await desk.ask("where is my parcel?", session_id="tool-3")
        assert missing.route == "EXTERNAL" and missing.fallback == "unknown_query"


async def _ask_tool_of(
    flood: FloodServer, shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder, extra: str = ""
) -> TurnResult:
    """One turn of the shop desk whose tool is ``flood`` (``extra``: more lines of the tool), once the server has
    seen the client go; the server is closed."""
    try:
        desk_dir = _with_tool(shop_dir, tmp_path, flood.url + "/track/{tracking}", extra)
        async with _open(desk_dir, pg_url, tmp_path, encoder) as desk:
            result = await desk.ask("carrier status of TRK-5505 please", session_id="tool-flood")
        assert flood.done.wait(60)
        return result
    finally:
        flood.close()


@pytest.mark.timeout(300)
async def test_a_flooding_tool_answer_is_cut_while_it_streams(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    bound = MAX_RESPONSE_BYTES + kernel_slack()
    flood = FloodServer(4 * bound)
    result = await _ask_tool_of(flood, shop_dir, pg_url, tmp_path, encoder)
    # the client stopped reading at the cut and closed: the server could not push the rest of the answer
    [sent] = flood.sent
    assert sent <= bound < flood.body_bytes, f"the client read {sent} bytes of a {flood.body_bytes}-byte answer"
    # the turn answers with what was read, and says it is cut
    assert (result.route, result.stop_reason) == ("EXTERNAL", "success")
    assert result.answer.startswith("shipping_status: xxxx")
    assert result.answer.endswith(
        f"(This is not the whole result: its first {MAX_QUOTED_CHARS} characters are quoted.)"
    )
    assert result.answer.count("x") == MAX_QUOTED_CHARS


@pytest.mark.timeout(120)
async def test_a_dripping_tool_answer_ends_at_the_tools_timeout(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    # one byte every 50 ms never trips a read timeout; the tool's timeout_seconds is the whole exchange's
    flood = FloodServer(MAX_RESPONSE_BYTES, drip=0.05)
    result = await _ask_tool_of(flood, shop_dir, pg_url, tmp_path, encoder, "timeout_seconds = 1")
    assert (result.route, result.fallback) == ("EXTERNAL", "tool_error:timeout")


async def test_a_compressed_tool_answer_is_not_expanded(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder
) -> None:
    # asked for an uncompressed answer, the server sends gzip anyway: not decompressed (a small body can expand to
    # gigabytes), a clear tool error
    body = gzip.compress(b'{"status": "at the depot"}')
    flood = FloodServer(len(body), headers="content-encoding: gzip\r\n", chunk=body)
    result = await _ask_tool_of(flood, shop_dir, pg_url, tmp_path, encoder)
    assert (result.route, result.fallback) == ("EXTERNAL", "tool_error:http_error")
