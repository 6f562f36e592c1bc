"""Durable runs: checkpoint after every step, resume in a fresh process after a crash, on SQLite and PostgreSQL.

Crash tests run a plan of tests/plan/durable_plans.py in a child process that dies with ``os._exit(1)`` inside a
step, then resume it in another fresh process; the side-effect log each step appends to is the external witness.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).with_name("durable_plans.py")


def run_child(plan: str, db: str, log: Path, key: str, *, crash: str = "", answer: str | None = None) -> Any:
    env = {**os.environ, "DB": db, "LOG": str(log), "KEY": key, "CRASH_AT": crash}
    args = [sys.executable, str(SCRIPT), plan, "1", *([] if answer is None else [answer])]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
    if crash:
        assert done.returncode == 1, done.stderr
        return None
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("plan", "crash"),
    [("linear", "c"), ("branch", "left"), ("branch", "join"), ("loop", "inc@2"), ("band", "p2"), ("band", "p3")],
)
def test_a_crashed_run_resumes_in_a_fresh_process_to_the_uninterrupted_result(
    plan: str, crash: str, plan_db: str, tmp_path: Path
) -> None:
    key = f"job-{uuid.uuid4().hex[:8]}"
    clean = run_child(plan, plan_db, tmp_path / "clean.log", f"{key}-clean")
    assert run_child(plan, plan_db, tmp_path / "run.log", key, crash=crash) is None
    before = lines(tmp_path / "run.log")
    resumed = run_child(plan, plan_db, tmp_path / "run.log", key)
    assert resumed == clean
    after = lines(tmp_path / "run.log")
    assert after[: len(before)] == before  # nothing was lost
    assert len(after) == len(set(after))  # every finished step ran once
    normalise = [line.split("/", 1)[1] for line in after]
    assert normalise == [line.split("/", 1)[1] for line in lines(tmp_path / "clean.log")]


def test_resume_inside_an_exclusive_branch_never_runs_the_sibling(plan_db: str, tmp_path: Path) -> None:
    """lazybridge 1.8.3 resumed a crash inside a branch by running on into the sibling branches."""
    key = f"job-{uuid.uuid4().hex[:8]}"
    run_child("branch", plan_db, tmp_path / "run.log", key, crash="left")
    status, path, _ = run_child("branch", plan_db, tmp_path / "run.log", key)
    assert status == "success"
    assert "right" not in path
    assert not any(line.endswith("/right") for line in lines(tmp_path / "run.log"))


def test_an_interrupt_survives_the_process_and_its_answer_reaches_the_step(plan_db: str, tmp_path: Path) -> None:
    key = f"job-{uuid.uuid4().hex[:8]}"
    status, path, payload = run_child("approval", plan_db, tmp_path / "run.log", key)
    assert (status, path, payload) == ("interrupted", ["start", "a", "ask"], None)
    status, path, payload = run_child("approval", plan_db, tmp_path / "run.log", key, answer="yes")
    assert status == "success"
    assert path == ["start", "a", "ask", "b"]
    assert payload["seen"] == ["a", "ask:yes", "b"]
    assert [line.rsplit("/", 1)[1] for line in lines(tmp_path / "run.log")] == ["a", "ask", "b"]


def test_resuming_a_finished_run_runs_nothing(plan_db: str, tmp_path: Path) -> None:
    key = f"job-{uuid.uuid4().hex[:8]}"
    first = run_child("linear", plan_db, tmp_path / "run.log", key)
    again = run_child("linear", plan_db, tmp_path / "run.log", key)
    assert again == first
    assert len(lines(tmp_path / "run.log")) == 4


@pytest.mark.parametrize("on_concurrent", ["fail", "fork"])
def test_a_second_process_on_a_live_key_is_refused_or_forks(on_concurrent: str, plan_db: str, tmp_path: Path) -> None:
    from routegate.plan import CheckpointConflictError, Plan, Step, Store

    key = f"job-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DB": plan_db, "LOG": str(tmp_path / "run.log"), "KEY": key}
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), "holding", "1"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"  # the child's run holds the key now
        ran: list[int] = []
        store = Store(db=plan_db)
        second = Plan(
            Step(lambda x: ran.append(x) or x, name="other"),
            store=store,
            checkpoint_key=key,
            on_concurrent=on_concurrent,
            resume=False,  # another plan: a fork that resumed the child's checkpoint would be refused as changed
        )
        if on_concurrent == "fail":
            with pytest.raises(CheckpointConflictError, match="held by a live run"):
                second.run(7)
            assert ran == []
        else:
            result = second.run(7)
            assert result.ok and ran == [7]
            assert result.checkpoint_key is not None and result.checkpoint_key.startswith(f"{key}/fork-")
        store.close()
        child.stdin.close()
        out = child.stdout.read()
        assert child.wait(timeout=60) == 0
        assert "'success'" in out  # the first run was not disturbed
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_in_one_process_a_live_key_is_refused_and_freed_when_the_run_ends(plan_db: str) -> None:
    from routegate.plan import CheckpointConflictError, Plan, Step, Store

    key = f"job-{uuid.uuid4().hex[:8]}"
    store = Store(db=plan_db)
    refused: list[str] = []

    def again(x: int) -> int:
        try:
            Plan(Step(lambda v: v, name="inner"), store=store, checkpoint_key=key).run(x)
        except CheckpointConflictError as exc:
            refused.append(str(exc))
        return x + 1

    try:
        plan = Plan(Step(again), store=store, checkpoint_key=key, resume=False)
        assert plan.run(1).output == 2
        assert len(refused) == 1 and key in refused[0]
        assert plan.run(5).output == 6  # the lease was released: the key is free again
        record = store.checkpoints.load(key)
        assert record is not None and (record.status, record.stop_reason) == ("ended", "success")
    finally:
        store.close()


def test_a_crash_after_an_answered_interrupt_keeps_the_answer(plan_db: str, tmp_path: Path) -> None:
    key = f"job-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "run.log"
    assert run_child("approval", plan_db, log, key)[0] == "interrupted"
    assert run_child("approval", plan_db, log, key, answer="yes", crash="b") is None
    status, path, payload = run_child("approval", plan_db, log, key)
    assert (status, path) == ("success", ["start", "a", "ask", "b"])
    assert payload["seen"] == ["a", "ask:yes", "b"]
    assert [line.rsplit("/", 1)[1] for line in lines(log)] == ["a", "ask", "b"]
