"""``bench/desk_cost.py`` stays runnable, and what it counts from libpq's protocol trace is what the desk sends:
a rule-routed SQL question costs two round trips on the pool (the SQL tool's pipeline, the memory write; its history
comes with its session lock's take); the other routes one or two."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench" / "desk_cost.py"


def test_the_cost_benchmark_counts_the_round_trips_of_each_route(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    small = ["--count-turns", "3", "--turns", "3", "--load-turns", "8", "--concurrency", "2", "--pieces", "3"]
    small.append("--count-load")
    done = subprocess.run(
        [sys.executable, str(BENCH), *small, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    pool = {route: row["pool_round_trips"] for route, row in figures["counts"].items()}
    assert pool == {"POSTGRES": 2.0, "VECTOR": 2.0, "EXTERNAL": 1.0, "LLM": 1.0}
    # the lock take with the history read (shared with the previous release), the SQL tool's four in one pipeline
    # (BEGIN, settings, query, ROLLBACK), memory write
    assert 6 <= figures["counts"]["POSTGRES"]["statements"] < 7
    assert figures["load"]["turns_per_s"] > 0 and figures["costs"]["POSTGRES"]["desk_cpu_ms"] > 0
    # back to back, and under load, a session's lock and history are kept between its turns when the next comes
    # before the release is sent (a matter of timing: only that they are counted is checked here)
    assert set(figures["counts_back_to_back"]) == set(figures["counts"])
    assert figures["load"]["statements"] > 0 and figures["load"]["round_trips"] > 0
    assert set(figures["pieces"]) == {"sql_tool", "history_read", "memory_write", "lock_hold", "lock_history"}
    assert all(piece["desk_cpu_ms"] > 0 for piece in figures["pieces"].values())
