"""One end-to-end test in a real browser: headless Debian Chromium driven by Playwright, against the running
Streamlit UI, which talks to the running server (real desk, embedded PostgreSQL) over HTTP. Needs ``apt-get install -y chromium``."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from routegate.server.testing import ServerThread
from routegate.ui import streamlit_command, streamlit_env

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def ui(real_server: ServerThread, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    log = (tmp_path / "streamlit.log").open("wb")
    proc = subprocess.Popen(
        streamlit_command(host="127.0.0.1", port=port),
        env=streamlit_env(server_url=real_server.url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # readiness probe, bounded
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}; see {tmp_path / 'streamlit.log'}")
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("streamlit did not become healthy within 60 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_browser_chat_shows_streamed_answer_and_route_panel(ui: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(ui)
            box = page.get_by_test_id("stChatInputTextArea")
            expect(box).to_be_visible(timeout=30_000)
            box.fill("What is the status of ticket 1?")
            box.press("Enter")
            main = page.get_by_role("main")
            answer = main.get_by_test_id("stChatMessage").nth(1)
            expect(answer).to_contain_text("Login not working", timeout=30_000)  # the streamed answer, from Postgres
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar.get_by_text("decided by the")).to_be_visible(timeout=30_000)
            expect(sidebar).to_contain_text("Route: POSTGRES", timeout=30_000)
            expect(sidebar).to_contain_text("Scores:", timeout=30_000)
            expect(sidebar.get_by_text("1 row (ok)")).to_be_visible(timeout=30_000)
            expect(sidebar.get_by_text("Fallback:")).to_be_visible(timeout=30_000)
            expect(sidebar.get_by_role("combobox", name="Turn")).to_have_value(
                "1. What is the status of ticket 1?", timeout=30_000
            )
            shot = tmp_path / "ui-chat.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 0
        finally:
            browser.close()
