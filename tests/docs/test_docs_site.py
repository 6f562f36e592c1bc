"""The documentation site builds with ``mkdocs build --strict`` (no broken link, no unresolved reference, every page
in the nav) and its API reference documents every name each public package exports in ``__all__``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_SECONDS = 240
API_PAGES = {
    "routegate": "routegate",
    "plan": "routegate.plan",
    "routers": "routegate.routers",
    "technique": "routegate.technique",
    "llm": "routegate.llm",
    "embed": "routegate.embed",
    "server": "routegate.server",
    "testing": "routegate.testing",
    "support": "routegate.apps.support",
}
MISSING = [
    name for name in ("mkdocs", "material", "mkdocstrings_handlers.python") if not importlib.util.find_spec(name)
]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the docs toolchain is not installed ({', '.join(MISSING)}): pip install -e '.[dev]'",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(
        [*command, "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_the_site_builds_strictly_with_every_topic_page(site: Path) -> None:
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.parent.name for p in site.glob("*/index.html")}
    assert pages - {"index"} <= built, f"pages left out of the site: {sorted(pages - {'index'} - built)}"
    assert {p.stem for p in (ROOT / "docs" / "benchmarks").glob("*.md")} <= {
        p.parent.name for p in (site / "benchmarks").glob("*/index.html")
    }


@pytest.mark.parametrize(("page", "package"), API_PAGES.items())
def test_the_api_reference_documents_every_exported_name(site: Path, page: str, package: str) -> None:
    html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
    documented = set(re.findall(r'id="' + re.escape(package) + r'\.([A-Za-z_0-9]+)(?:\.[A-Za-z_0-9]+)?"', html))
    exported = set(importlib.import_module(package).__all__)
    assert exported - documented == set(), f"exported by {package} but not in docs/api/{page}.md"
