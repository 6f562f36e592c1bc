"""HTTP tools from desk.toml: a route of kind "tool" calls its tool behind the gateway — the mock offline, the URL
(a loopback server here) otherwise — with the arguments found in the message."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from routegate.apps.support.desk import SupportAgent
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
