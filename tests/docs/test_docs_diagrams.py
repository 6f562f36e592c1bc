"""The plan diagrams of the docs are generated from the examples' code and render.

* every ```python example that builds a ``Plan`` is followed by its diagram (a ``<!-- diagram: NAME -->`` marker);
* each diagram is what ``docs/_ext/diagrams.py`` generates from the example now (``python docs/_ext/diagrams.py``
  rewrites them): a plan that changes makes this fail until its diagram is regenerated;
* each one parses and renders with Mermaid 11 — the one Streamlit ships, loaded from a loopback server into a
  headless Chromium (nothing is fetched from the network); the docs site uses Mermaid 11 too.
"""

from __future__ import annotations

import http.server
import importlib.util
import re
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_diagrams", ROOT / "docs" / "_ext" / "diagrams.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


diagrams = _generator()
PAGES = diagrams.pages()


def test_every_example_that_builds_a_plan_is_followed_by_its_diagram() -> None:
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        lines = page.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            if line != "```python":
                continue
            end = lines.index("```", index + 1)
            if not re.search(r"\bPlan\(", "\n".join(lines[index + 1 : end])):
                continue
            following = next((i for i in range(end + 1, len(lines)) if lines[i].startswith("```")), len(lines))
            if not any(diagrams.MARKER.match(lines[i]) for i in range(end + 1, following)):
                missing.append(f"{page.relative_to(ROOT)}:{index + 1}")
    assert missing == [], f"examples that build a plan without its diagram (add <!-- diagram: NAME -->): {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_each_diagram_is_what_its_example_draws_now(page: Path) -> None:
    assert diagrams.render(page) == page.read_text(encoding="utf-8"), (
        f"the diagrams of {page.relative_to(ROOT)} are stale: run `python docs/_ext/diagrams.py`"
    )


def _mermaid_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```mermaid\n(.*?)^```$", text, re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1)))
    return found


@pytest.fixture(scope="module")
def mermaid_server() -> Iterator[str]:
    """A loopback server of Streamlit's own JavaScript (its Mermaid among it) and a blank page."""
    streamlit = importlib.util.find_spec("streamlit")
    if streamlit is None or streamlit.origin is None:
        pytest.skip("needs streamlit (the ui extra), whose Mermaid renders the diagrams")
    scripts = Path(streamlit.origin).parent / "static" / "static" / "js"
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(scripts))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


RENDER = """async ([module, diagrams]) => {
    const mermaid = (await import(module)).default;
    mermaid.initialize({startOnLoad: false});
    const failed = [];
    for (const [where, text] of diagrams) {
        try {
            const {svg} = await mermaid.render("d" + failed.length + Math.random().toString(36).slice(2), text);
            if (!svg.includes("<svg")) failed.push(where + ": no svg");
        } catch (error) {
            failed.push(where + ": " + String(error && error.message || error));
        }
    }
    return failed;
}"""


@pytest.mark.e2e
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install -y chromium")
def test_every_diagram_renders_with_mermaid(mermaid_server: str) -> None:
    from playwright.sync_api import sync_playwright

    scripts = Path(importlib.util.find_spec("streamlit").origin).parent / "static" / "static" / "js"  # type: ignore[union-attr,arg-type]  # found by the fixture
    module = next(scripts.glob("mermaid.core.*.js")).name
    blocks = _mermaid_blocks()
    assert len(blocks) >= 20
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_page()
            fetched: list[str] = []
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(f"{mermaid_server}/{module}")  # any page of the server: the module is imported from it
            failed = page.evaluate(RENDER, [f"{mermaid_server}/{module}", blocks])
        finally:
            browser.close()
    assert failed == []
    assert all(url.startswith(mermaid_server) for url in fetched)
