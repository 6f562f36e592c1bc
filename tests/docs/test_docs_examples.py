"""Every ```python block of README.md and docs/**/*.md runs on its own, as a reader would run it.

Each block is written to a file and run by a fresh interpreter (this venv's python) from the repository root,
independently of the other blocks, with no ``OPENAI_*``/``ROUTEGATE_*``/``DATABASE_URL`` from the caller's
environment and a data directory of its own. So every block carries its own imports and set-up, and top-level
``await`` is a failure (``asyncio.run(...)`` is what works in a script).

A block whose first lines hold ``# needs: routegate serve`` gets a running server: this module starts
``routegate serve`` once (embedded PostgreSQL, offline router) and passes its URL in ``ROUTEGATE_URL``. Blocks run
two at a time in the background as soon as the module's first test starts; each test waits for its own block.
Blocks that are not meant to run (output, shell sessions) are ```text / ```console / ```bash, not ```python.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from routegate.server.testing import free_port, stop_process, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
# docs/_*.md are fragments waiting to be merged into a page, not pages
DOCS = (ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if not p.name.startswith("_")))
FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^`]*)$")
PYTHON_INFOS = frozenset({"python", "py", "python3"})
NEEDS = re.compile(r"^#\s*needs:\s*(?P<what>.+?)\s*$")
KNOWN_NEEDS = frozenset({"routegate serve"})
# blocks that open the support desk start an embedded PostgreSQL of their own (in their data directory)
USES_DATABASE = ("open_support_desk", "SupportDatabase", "EmbeddedPostgres")
BLOCK_TIMEOUT_SECONDS = 180
PARALLEL = 2  # the CI machine has two cores
CALLER_ENV_PREFIXES = ("OPENAI_", "ROUTEGATE_")
NETGUARD = Path(__file__).with_name("netguard")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # the first line of code, 1-based, in the doc
    source: str

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def needs(self) -> frozenset[str]:
        """``# needs: X`` comments among the block's leading comment lines."""
        found: set[str] = set()
        for text in self.source.splitlines():
            if not text.startswith("#"):
                break
            match = NEEDS.match(text)
            if match:
                found.add(match["what"])
        return frozenset(found)

    @property
    def marks(self) -> list[pytest.MarkDecorator]:
        if "routegate serve" in self.needs:
            return [pytest.mark.e2e, pytest.mark.integration]
        if any(name in self.source for name in USES_DATABASE):
            return [pytest.mark.integration]
        return []


def python_blocks(doc: Path) -> list[Block]:
    """The doc's ```python blocks; a fence closes on a bare line of at least as many backticks."""
    blocks: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        index += 1
        if opening is None:
            continue
        fence, info = opening["fence"], opening["info"].strip()
        start = index
        while index < len(lines) and not (lines[index].startswith(fence) and lines[index].strip("`") == ""):
            index += 1
        if info in PYTHON_INFOS:
            blocks.append(Block(doc, start + 1, "\n".join(lines[start:index]) + "\n"))
        index += 1  # past the closing fence
    return blocks


BLOCKS = [block for doc in DOCS for block in python_blocks(doc)]
README_BLOCK = BLOCKS[0]  # the library example at the top of README.md


def _env(data_dir: Path, server_url: str | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(CALLER_ENV_PREFIXES) and key != "DATABASE_URL"
    }
    env["ROUTEGATE_DATA_DIR"] = str(data_dir)
    env["ROUTEGATE_DB_KEEP_WARM_SECONDS"] = "0"  # the data dir is removed after the block: nothing kept warm in it
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(NETGUARD)  # its sitecustomize refuses connections beyond loopback
    if server_url is not None:
        env["ROUTEGATE_URL"] = server_url
    return env


def _run_block(block: Block, workdir: Path, server_url: str | None) -> subprocess.CompletedProcess[str]:
    name = re.sub(r"\W", "_", block.id)
    script = workdir / f"{name}.py"
    # padded so that a traceback's line number is the line in the doc
    script.write_text("\n" * (block.line - 1) + block.source, encoding="utf-8")
    data_dir = workdir / f"{name}-data"
    data_dir.mkdir()
    return subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        cwd=ROOT,
        env=_env(data_dir, server_url if "routegate serve" in block.needs else None),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_SECONDS,
        check=False,
    )


@contextlib.contextmanager
def _routegate_serve(workdir: Path) -> Iterator[str]:
    """``routegate serve`` on a free loopback port with the embedded default; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    routegate = Path(sys.executable).with_name("routegate")
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(routegate), "serve", "--port", str(port)],
        cwd=ROOT,
        env=_env(workdir / "serve-data", None),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_serving(f"{url}/healthz", proc, timeout=180, what="routegate serve")
        yield url
    finally:
        stop_process(proc)
        log.close()


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Starts every selected block in the background (two at a time); maps block id to its outcome."""
    selected: dict[str, Block] = {}
    for item in request.session.items:
        if not isinstance(item, pytest.Function) or item.module is not request.module:
            continue
        if item.originalname == "test_block_runs_on_its_own":
            block = item.callspec.params["block"]
            selected[block.id] = block
        elif item.originalname == "test_readme_example_routes_the_refund_to_billing":
            selected[README_BLOCK.id] = README_BLOCK
    # outside pytest's numbered temp folders, which a concurrent pytest run may rotate away under PostgreSQL
    workdir = Path(tempfile.mkdtemp(prefix="routegate-docs-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)
        server_url = None
        if any("routegate serve" in block.needs for block in selected.values()):
            server_url = stack.enter_context(_routegate_serve(workdir))
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=PARALLEL))
        futures = {key: pool.submit(_run_block, block, workdir, server_url) for key, block in selected.items()}
        stack.callback(lambda: [future.cancel() for future in futures.values()])
        yield futures


def test_the_docs_have_their_examples() -> None:
    docs = {block.doc.relative_to(ROOT).as_posix() for block in BLOCKS}
    assert {"README.md", "docs/plan.md", "docs/routers.md", "docs/llm.md"} <= docs
    assert len(BLOCKS) >= 20


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in BLOCKS])
def test_block_is_a_script(block: Block) -> None:
    """Compiles as a module (no top-level ``await``) and declares only needs this test knows how to meet."""
    compile(block.source, block.id, "exec", dont_inherit=True)
    assert block.needs <= KNOWN_NEEDS, f"{block.id}: unknown '# needs:' {sorted(block.needs - KNOWN_NEEDS)}"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=b.marks) for b in BLOCKS])
def test_block_runs_on_its_own(block: Block, outcomes: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    done = outcomes[block.id].result()
    if done.returncode != 0:
        pytest.fail(
            f"{block.id} failed when run on its own (exit {done.returncode}):\n{done.stderr}\n--- stdout ---\n"
            f"{done.stdout}",
            pytrace=False,
        )


def test_readme_example_routes_the_refund_to_billing(
    outcomes: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    done = outcomes[README_BLOCK.id].result()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["success", "billing"]


def test_python_fences_use_one_info_string() -> None:
    """```py / ```python3 run too, but one spelling keeps the docs greppable."""
    for doc in DOCS:
        for number, text in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            match = FENCE.match(text)
            if match and match["info"].strip() in PYTHON_INFOS - {"python"}:
                raise AssertionError(f"{doc.relative_to(ROOT)}:{number}: write ```python")


SELF_CONTAINED = re.compile(r"DESIGN\.md|\bthe seed\b|seed's|shared/(seeds|data)|\.\./shared", re.IGNORECASE)


def test_docs_stand_alone() -> None:
    """The docs state their contracts themselves: no pointer to files a reader of the repository does not have."""
    found = [
        f"{doc.relative_to(ROOT)}:{number}: {text.strip()}"
        for doc in DOCS
        for number, text in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1)
        if SELF_CONTAINED.search(text)
    ]
    assert not found, "\n".join(found)


def test_blocks_pass_pyflakes(tmp_path: Path) -> None:
    """No undefined names, unused imports or unused variables in an example (ruff's pyflakes rules)."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.exists():
        pytest.skip("ruff is not installed in this environment")
    for number, block in enumerate(BLOCKS):
        padded = "\n" * (block.line - 1) + block.source  # line numbers are the doc's
        (tmp_path / f"block_{number:03d}.py").write_text(padded, encoding="utf-8")
    done = subprocess.run(
        [str(ruff), "check", "--no-cache", "--isolated", "--select", "F", "--output-format", "concise", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    docs = {f"block_{number:03d}.py": str(block.doc.relative_to(ROOT)) for number, block in enumerate(BLOCKS)}
    if done.returncode != 0:
        pytest.fail(re.sub(r"block_\d{3}\.py", lambda match: docs[match.group(0)], done.stdout), pytrace=False)


def test_examples_cannot_reach_beyond_loopback(tmp_path: Path) -> None:
    """The environment the blocks run in refuses connections outside loopback, as the suite's own guard does."""
    probe = "import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80), timeout=5)\nexcept RuntimeError as e:\n    print(e)\n"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=_env(tmp_path, None),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "outside loopback (tried 192.0.2.1)" in done.stdout, done.stderr
