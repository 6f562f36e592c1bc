"""The runnable example in docs/routers.md works as written."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "routers.md"


def test_docs_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    runnable = [b for b in blocks if "from routegate" in b]
    assert runnable, "docs/routers.md lost its runnable example"
    for block in runnable:
        exec(compile(block, str(DOC), "exec"), {})
