"""The Python example of docs/support.md is executed (against the session's embedded PostgreSQL)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "support.md"

pytestmark = pytest.mark.integration


def test_python_example_runs(
    pg_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(data_dir))
    exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    assert "POSTGRES - Alex Brown (customer 3) is from Toronto." in out
    kinds = out.strip().splitlines()[-1].split()
    assert kinds[:2] == ["route", "tool"] and kinds[-1] == "final"
    assert set(kinds[2:-1]) == {"token"}
