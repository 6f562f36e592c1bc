"""docs/plan.md is executed: its ```python blocks run in order in one namespace (top-level await allowed)."""

from __future__ import annotations

import ast
import asyncio
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "plan.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[tuple[int, str]]:
    text = DOC.read_text(encoding="utf-8")
    return [(text.count("\n", 0, match.start()) + 2, match.group(1)) for match in BLOCK.finditer(text)]


def test_the_doc_has_examples() -> None:
    assert len(python_blocks()) >= 10


def test_every_example_in_docs_plan_md_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("docs_plan")  # a real module: dataclasses and pydantic look classes up there
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    for line, source in python_blocks():
        # pad so tracebacks point at the line in docs/plan.md; dont_inherit: no `from __future__` of this file
        code = compile(
            "\n" * (line - 1) + source, str(DOC), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
        )
        outcome = eval(code, namespace)  # a coroutine when the block uses top-level await
        if asyncio.iscoroutine(outcome):
            asyncio.run(outcome)
    assert {"plan", "triaged", "done", "joined", "rescued", "trace"} <= namespace.keys()  # every block ran
