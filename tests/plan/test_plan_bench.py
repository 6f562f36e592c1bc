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


def test_the_two_trees_bench_reads_the_figures_of_a_bench_report(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("trees_bench", BENCH.with_name("trees.py"))
    assert spec is not None and spec.loader is not None
    trees = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, trees)
    spec.loader.exec_module(trees)
    report = (
        "python 3.11.7 on x86_64, best of 5 samples\n"
        "variant                                           µs/run  x floor\n"
        "routegate run (sync), routes= + when                4.73      9.1\n"
        "plan run, routes_by + pydantic output                                  58605\n"
        "routegate is 22.2x (sync) / 19.3x (async) faster than lazybridge Plan, async steps (its fastest)\n"
    )
    found, other = trees.figures(report)
    assert found == {"routegate run (sync), routes= + when": 4.73, "plan run, routes_by + pydantic output": 58605.0}
    assert other[-1].startswith("routegate is 22.2x")


def test_the_long_run_of_the_durable_benchmark_runs_on_every_store_it_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/plan_durable.py --long: one run per store (memory, SQLite; each also keeping only the latest), its
    history listed (the command in a fresh process for SQLite)."""
    spec = importlib.util.spec_from_file_location("plan_durable_bench", BENCH.with_name("plan_durable.py"))
    assert spec is not None and spec.loader is not None
    durable = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, durable)
    spec.loader.exec_module(durable)
    if not Path(sys.executable).with_name("routegate").exists():
        pytest.skip("the routegate command is not installed beside this interpreter")
    durable.main(["--long", "30", "--latest-only", "--no-postgres"])
    rows = [line.split("|")[1].strip() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == ["memory", "memory, latest only", "SQLite", "SQLite, latest only"]
