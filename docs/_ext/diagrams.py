"""The plan diagrams of the docs, generated from the examples' own code: ``python docs/_ext/diagrams.py`` rewrites
them, ``--check`` (and ``tests/docs/test_docs_diagrams.py``) fails when one is not what its code draws.

A diagram follows the example that builds its plan, after a marker naming the plan::

    <!-- diagram: loop -->
    *`loop.diagram()`*

    ```mermaid
    flowchart TD
    ...
    ```

Everything from the marker to the end of the Mermaid block is generated: the ```python block before the marker is
run (each page's marked blocks one after the other in a fresh interpreter, each in a namespace of its own) and
the marker's expression (``loop``, ``triage.plan``) evaluated there; ``Plan.diagram().mermaid()`` is the block.
A marker with a name from :data:`BUILDERS` draws a plan the docs show without building it (the support desk's).
MkDocs renders the blocks with Material's Mermaid support (``pymdownx.superfences``' ``mermaid`` fence), GitHub
renders them as they are.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- diagram: (?P<expr>[^>]+?) -->$")
FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^`]*)$")
SEPARATOR = "\n@@routegate-diagrams@@\n"


def _desk() -> Any:
    """The support desk's plan, as its graph declares it, around stand-ins (its shape needs no database)."""
    from routegate.apps.support.graph import support_plan

    class StandIn:
        max_route_attempts = 1  # the router step's: the plan's step bound is read from it

        def run_step(self, payload: Any, ctx: Any) -> Any:
            return payload

    # stand-ins for the router, tool and Respond steps: only the shape is drawn
    return support_plan(router=StandIn(), tool=StandIn(), respond=StandIn())  # type: ignore[arg-type]  # stand-ins


BUILDERS: dict[str, Callable[[], Any]] = {"the support desk": _desk}


def pages() -> list[Path]:
    """The pages that hold a diagram marker."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [page for page in docs if any(MARKER.match(line) for line in page.read_text(encoding="utf-8").splitlines())]


def _markers(lines: list[str]) -> list[tuple[int, str, str | None]]:
    """``(line index, expression, the source of the python block before it)`` for every marker."""
    found: list[tuple[int, str, str | None]] = []
    block: str | None = None
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        marker = MARKER.match(lines[index])
        if marker is not None:
            expr = marker["expr"].strip()
            found.append((index, expr, None if expr in BUILDERS else block))
        if opening is None:
            index += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        start = index + 1
        index = start
        while index < len(lines) and not (lines[index].startswith(fence) and lines[index].strip("`") == ""):
            index += 1
        if info == "python":
            block = "\n".join(lines[start:index]) + "\n"
        index += 1
    return found


_RUNNER = """
import json, sys
jobs = json.loads(sys.stdin.read())
drawn = []
for source, exprs in jobs:
    space = {"__name__": "__main__"}
    exec(compile(source, "<docs example>", "exec"), space)
    drawn.append([eval(expr, space).diagram().mermaid() for expr in exprs])
sys.stdout.write(SEPARATOR + json.dumps(drawn))
"""


def draw(page: Path) -> dict[int, str]:
    """The Mermaid text of every marker of ``page``, by the marker's line index."""
    lines = page.read_text(encoding="utf-8").splitlines()
    markers = _markers(lines)
    jobs: list[tuple[str, list[str]]] = []
    where: list[list[int]] = []
    drawn: dict[int, str] = {}
    for index, expr, source in markers:
        if expr in BUILDERS:
            drawn[index] = BUILDERS[expr]().diagram().mermaid()
            continue
        if source is None:
            raise ValueError(f"{page.name}:{index + 1}: the diagram of {expr!r} follows no ```python block")
        if jobs and jobs[-1][0] == source:
            jobs[-1][1].append(expr)
            where[-1].append(index)
        else:
            jobs.append((source, [expr]))
            where.append([index])
    if jobs:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROUTEGATE_"))}
        done = subprocess.run(
            [sys.executable, "-W", "error", "-c", _RUNNER.replace("SEPARATOR", repr(SEPARATOR))],
            input=json.dumps(jobs),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or SEPARATOR not in done.stdout:
            raise RuntimeError(f"the examples of {page.name} did not run:\n{done.stderr[-4000:]}")
        results = json.loads(done.stdout.split(SEPARATOR, 1)[1])
        for indexes, texts in zip(where, results, strict=True):
            drawn.update(zip(indexes, texts, strict=True))
    return drawn


def render(page: Path) -> str:
    """``page`` with every marker followed by its diagram, as generated now."""
    text = page.read_text(encoding="utf-8")
    lines = text.splitlines()
    drawn = draw(page)
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        out.append(line)
        at, index = index, index + 1
        if at not in drawn:
            continue
        marker = MARKER.match(line)
        assert marker is not None
        expr = marker["expr"].strip()
        index = _past_generated(lines, index)
        caption = f"*{expr}*" if expr in BUILDERS else f"*`{expr}.diagram()`*"
        out += [caption, "", "```mermaid", *drawn[at].rstrip("\n").split("\n"), "```", ""]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _past_generated(lines: list[str], index: int) -> int:
    """The index after what a marker's diagram was generated as last time (its caption and Mermaid block)."""
    if index < len(lines) and lines[index].startswith("*") and lines[index].endswith("*"):
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index < len(lines) and lines[index] == "```mermaid":
        index += 1
        while index < len(lines) and lines[index] != "```":
            index += 1
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    return index


def main(argv: list[str]) -> int:
    """Rewrite every page's diagrams (``--check``: say which page is stale and fail instead)."""
    stale = []
    for page in pages():
        fresh = render(page)
        if fresh != page.read_text(encoding="utf-8"):
            stale.append(page.relative_to(ROOT))
            if "--check" not in argv:
                page.write_text(fresh, encoding="utf-8")
    verb = "stale" if "--check" in argv else "rewritten"
    for page in stale:
        print(f"{verb}: {page}")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
