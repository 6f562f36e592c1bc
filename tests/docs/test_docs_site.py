"""The documentation site builds with ``mkdocs build --strict`` (no broken link or anchor, no unresolved reference,
every page in the nav), the same settings fail a build with a broken anchor or a page left out of the nav, and the
API reference has a page for every public package with an ``__all__`` that documents every name it exports."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_SECONDS = 240
PACKAGE = ROOT / "src" / "routegate"
MISSING = [
    name for name in ("mkdocs", "material", "mkdocstrings_handlers.python") if not importlib.util.find_spec(name)
]

pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the docs toolchain is not installed ({', '.join(MISSING)}): pip install -e '.[dev]'",
)


def api_pages() -> dict[str, str]:
    """``docs/api/<page>.md`` -> the package its first ``::: package`` block documents."""
    pages = {}
    for path in sorted((ROOT / "docs" / "api").glob("*.md")):
        found = re.search(r"^::: ([\w.]+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
        assert found is not None, f"{path.relative_to(ROOT)} documents no package (no `::: routegate...` line)"
        pages[path.stem] = found.group(1)
    return pages


def public_packages() -> set[str]:
    """The packages of ``src/routegate`` whose path has no ``_`` part and whose ``__init__.py`` sets ``__all__``
    (read, not imported: a package that needs an extra counts too)."""
    found = set()
    for init in PACKAGE.rglob("__init__.py"):
        parts = ("routegate", *init.parent.relative_to(PACKAGE).parts)
        if any(part.startswith("_") for part in parts):
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        targets = [t for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign) for t in _targets(node)]
        if "__all__" in targets:
            found.add(".".join(parts))
    return found


def _targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    names = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [n.id for n in names if isinstance(n, ast.Name)]


def build(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``out``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_the_site_builds_strictly_with_every_topic_page(site: Path) -> None:
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    built = {p.parent.name for p in site.glob("*/index.html")}
    assert pages - {"index"} <= built, f"pages left out of the site: {sorted(pages - {'index'} - built)}"
    assert {p.stem for p in (ROOT / "docs" / "benchmarks").glob("*.md")} <= {
        p.parent.name for p in (site / "benchmarks").glob("*/index.html")
    }


def test_every_public_package_has_an_api_page() -> None:
    documented = set(api_pages().values())
    missing = public_packages() - documented
    assert missing == set(), f"public packages with no page in docs/api/: {sorted(missing)}"
    assert documented <= public_packages(), "a page in docs/api/ for no public package"


def mkdocs_config() -> dict[str, Any]:
    """mkdocs.yml as mkdocs reads it: our own file, whose ``!!python/name:`` tags (the Mermaid fence's formatter)
    name functions — the safe loader refuses them."""
    import yaml

    loaded: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.Loader)
    return loaded


def test_every_api_page_is_in_the_nav() -> None:
    config = mkdocs_config()
    reference = next(entry["API reference"] for entry in config["nav"] if "API reference" in entry)
    listed = {path for entry in reference for path in entry.values()}
    assert listed == {f"api/{page}.md" for page in api_pages()}


@pytest.mark.parametrize(("page", "package"), api_pages().items())
def test_the_api_reference_documents_every_exported_name(site: Path, page: str, package: str) -> None:
    html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
    documented = set(re.findall(r'id="' + re.escape(package) + r'\.([A-Za-z_0-9]+)(?:\.[A-Za-z_0-9]+)?"', html))
    exported = set(importlib.import_module(package).__all__)
    assert exported - documented == set(), f"exported by {package} but not in docs/api/{page}.md"


# -- the same settings on a tiny site: what they refuse ------------------------------------------------------------
def tiny_site(tmp_path: Path, pages: dict[str, str], nav: list[str]) -> subprocess.CompletedProcess[str]:
    """A site of ``pages`` built with mkdocs.yml's own settings (``strict``, ``validation``, the Markdown
    extensions), its nav ``nav`` and no API reference (the mkdocstrings plugin is left out: nothing to document)."""
    import yaml

    config = mkdocs_config()
    config.pop("exclude_docs", None)
    config.update(docs_dir=str(tmp_path / "docs"), nav=nav, plugins=["search"])
    (tmp_path / "docs").mkdir()
    for name, text in pages.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(yaml.dump(config), encoding="utf-8")  # !!python/name tags written back
    return build(tmp_path / "mkdocs.yml", tmp_path / "site")


PAGES = {"index.md": "# Home\n\nSee [the section](other.md#a-section).\n", "other.md": "# Other\n\n## A section\n"}


def test_the_tiny_site_builds_when_nothing_is_wrong(tmp_path: Path) -> None:
    done = tiny_site(tmp_path, PAGES, ["index.md", "other.md"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    pages = {**PAGES, "index.md": "# Home\n\nSee [the section](other.md#no-such-section).\n"}
    done = tiny_site(tmp_path, pages, ["index.md", "other.md"])
    assert done.returncode != 0
    assert "does not contain an anchor '#no-such-section'" in done.stderr


def test_a_page_outside_the_nav_fails_the_build(tmp_path: Path) -> None:
    done = tiny_site(tmp_path, {**PAGES, "stray.md": "# Stray\n"}, ["index.md", "other.md"])
    assert done.returncode != 0
    assert 'not included in the "nav"' in done.stderr and "stray.md" in done.stderr
