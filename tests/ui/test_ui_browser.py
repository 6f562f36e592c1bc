"""End-to-end tests in a real browser: headless Debian Chromium driven by Playwright, against the running
Streamlit UI, which talks to the running server (real desk, embedded PostgreSQL) over HTTP. Needs ``apt-get install -y chromium``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routegate.server.testing import ServerThread, free_port, stop_process, wait_until_serving
from routegate.ui.launch import streamlit_command, streamlit_env

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


@pytest.fixture
def ui(real_server: ServerThread, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "streamlit.log").open("wb")
    proc = subprocess.Popen(
        streamlit_command(host="127.0.0.1", port=port),
        env=streamlit_env(server_url=real_server.url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_serving(f"{url}/_stcore/health", proc, timeout=60, what="streamlit")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; see {tmp_path / 'streamlit.log'}") from exc
        yield url
    finally:
        stop_process(proc)
        log.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_browser_chat_shows_streamed_answer_and_route_panel(ui: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _ask(page, ui, "What is the status of ticket 1?")
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


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_browser_turn_panel_draws_the_desks_plan_with_the_turns_path(ui: str, tmp_path: Path) -> None:
    """The sidebar's turn panel draws the desk's plan (GET /plan) in Mermaid, rendered in the page by Streamlit's
    own Mermaid with no network: the steps the turn ran (router, POSTGRES, LLM) are highlighted, the others not."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 1400})
            fetched: list[str] = []
            context.on("request", lambda request: fetched.append(request.url))
            page = context.new_page()
            _ask(page, ui, "What is the status of ticket 1?")
            sidebar = page.get_by_test_id("stSidebar")
            expect(sidebar).to_contain_text("Route: POSTGRES", timeout=30_000)
            expect(sidebar.get_by_text("the steps this turn ran are highlighted")).to_be_visible(timeout=30_000)
            chart = sidebar.get_by_test_id("stMermaidChart").get_by_role("img")
            expect(chart).to_have_attribute("alt", "the desk's plan; this turn ran router → POSTGRES → LLM")
            # Streamlit renders the Mermaid text to an SVG image in the page: read it back, node by node
            svg = page.evaluate("async (src) => await (await fetch(src)).text()", chart.get_attribute("src"))
            nodes = {_name(text): classes for text, classes in _svg_nodes(svg)}
            assert set(nodes) == {"input", "router", "refused", "POSTGRES", "VECTOR", "EXTERNAL", "LLM", "end"}
            assert {name for name, classes in nodes.items() if "taken" in classes} == {
                "input",
                "router",
                "POSTGRES",
                "LLM",
                "end",
            }
            sidebar.screenshot(path=str(tmp_path / "ui-plan.png"))
            assert all(url.startswith(("http://127.0.0.1", "ws://127.0.0.1", "data:", "blob:")) for url in fetched)
        finally:
            browser.close()


def _ask(page: Any, ui: str, message: str) -> None:
    """Open the UI in ``page`` and send ``message`` in its chat box."""
    from playwright.sync_api import expect

    page.set_default_timeout(30_000)
    page.goto(ui)
    box = page.get_by_test_id("stChatInputTextArea")
    expect(box).to_be_visible(timeout=30_000)
    box.fill(message)
    box.press("Enter")


def _svg_nodes(svg: str) -> list[tuple[str, set[str]]]:
    """The nodes of a Mermaid flowchart's SVG: each one's text and its classes."""
    from xml.etree import ElementTree

    found = []
    for group in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        classes = set((group.get("class") or "").split())
        if "node" in classes:
            found.append(("".join(group.itertext()).strip(), classes))
    return found


def _name(text: str) -> str:
    """A node's step name: its text's first line (the note, a second line, follows it without a space)."""
    names = ("input", "router", "refused", "POSTGRES", "VECTOR", "EXTERNAL", "LLM", "end")
    return next((name for name in names if text.startswith(name)), text)
