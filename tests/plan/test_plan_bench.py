"""bench/plan_overhead.py stays runnable: every variant (floor, routegate, lazybridge, LangGraph) gives the same
answers and the report renders. No timing is asserted here (the figures live in docs/benchmarks/plan.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "plan_overhead.py"


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_overhead_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # pydantic resolves the models' annotations there
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_every_variant_and_reports_ratios(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    bench.main(["--runs", "30", "--peer-runs", "8", "--repeats", "1"])
    out = capsys.readouterr().out
    for variant in ("plain Python (floor)", "routegate run (sync)", "routegate arun", "lazybridge Plan", "LangGraph"):
        assert variant in out
    assert "faster than lazybridge" in out and "faster than LangGraph" in out
