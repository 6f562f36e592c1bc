"""Checkpoints written by an earlier release resume: the documents below were written by routegate before the run's
position became an object (issue 24), byte for byte as its checkpoint store held them. A change to the checkpoint
format, to the fingerprint of a plan or to how a run is restored makes these fail — the document must either
resume into the step it names or be refused with a message naming the format."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from routegate.plan import CheckpointMismatchError, Store


def _plans() -> ModuleType:
    # loaded under its own top-level name: a checkpoint's fingerprint hashes the targets' module names
    name = "compat_plans"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("compat_plans.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


cp = _plans()

PAUSED: dict[str, Any] = json.loads(
    r"""{"state": {"allowance": 0, "answers": {"compat-1/2/refund": []}, "asked": "compat-1/2/refund", "at": 1, "band": {}, "decisions": [["refund", "when.field('amount').greater_than(0)"]], "envelopes": [{"ms": 0.033, "p": {"amount": 250}, "s": "classify"}], "fingerprint": "3468db5e703f663c75fb4b5aaa644b7f", "format": 2, "input": 250, "iterations": 1, "next": "refund", "prev": {"v": {"amount": 250}}, "rejoin": 0, "result": {"decisions": [["refund", "when.field('amount').greater_than(0)"], [null, "interrupted"]], "elapsed_ms": 4.446, "envelopes": [{"ms": 0.033, "p": {"amount": 250}, "s": "classify"}, {"e": {"key": "compat-1/2/refund", "message": "interrupted: {'approve_refund': 250}", "phase": "step", "question": {"approve_refund": 250}, "stop_reason": "interrupted", "type": "Interrupt"}, "ms": 0.027, "p": null, "s": "refund"}], "error": {"key": "compat-1/2/refund", "message": "interrupted: {'approve_refund': 250}", "phase": "step", "question": {"approve_refund": 250}, "stop_reason": "interrupted", "type": "Interrupt"}, "payload": null, "stop_reason": "interrupted"}, "store": {"claim": {"amount": 250}}}, "status": "interrupted", "stop_reason": "interrupted"}"""
)
"""refund_plan(…).run(250): paused on refund's question, the rejoin at notify pending, the claim in the store."""

MID_BAND: dict[str, Any] = json.loads(
    r"""{"allowance": 0, "answers": {}, "at": 2, "band": {"left": {"ms": 0.01, "p": "left:3", "s": "left"}}, "decisions": [[null, "linear"], ["inc", "when.field('n').less_than(3)"], [null, "no route matched; linear"]], "envelopes": [{"ms": 0.008, "p": {"n": 1}, "s": "start"}, {"ms": 0.003, "p": {"n": 2}, "s": "inc"}, {"ms": 0.002, "p": {"n": 3}, "s": "inc"}], "fingerprint": "9fdb87eb153d137cd549e5c0b3d57e87", "format": 2, "input": 1, "iterations": 3, "next": "left", "prev": {"v": {"n": 3}}, "rejoin": -1, "store": {}}"""
)
"""loop_plan(…).run(1) as it stood when the process died inside the parallel band: left finished, right not."""


def _stored(status: str, stop_reason: str, state: dict[str, Any]) -> Store:
    store = Store()
    store.checkpoints.save(cp.KEY, status, stop_reason, copy.deepcopy(state))
    return store


def test_a_paused_run_written_before_resumes_with_its_answer_into_the_step_that_asked() -> None:
    store = _stored(PAUSED["status"], PAUSED["stop_reason"], PAUSED["state"])
    result = cp.refund_plan(store).run(answer="yes")
    assert (result.ok, result.stop_reason) == (True, "success")
    assert result.output == "notified: refunded 250"
    assert result.path == ("classify", "refund", "notify")  # the pending rejoin was restored
    assert store["claim"] == cp.Claim(amount=250)  # the store's write came back through output=


def test_a_crashed_run_written_before_resumes_inside_its_band_without_rerunning_the_finished_member() -> None:
    store = _stored("running", "", MID_BAND)
    result = cp.loop_plan(store).run()
    assert (result.ok, result.stop_reason) == (True, "success")
    assert result.output == "left=left:3 + right=right:3"
    assert result.path == ("start", "inc", "inc", "left", "right", "join")
    left = next(env for env in result.envelopes if env.step == "left")
    assert left.elapsed_ms == MID_BAND["band"]["left"]["ms"]  # restored from the checkpoint, not run again
    assert store.checkpoints.load(cp.KEY) is not None


def test_a_checkpoint_of_an_unknown_format_is_refused_naming_the_format() -> None:
    state = copy.deepcopy(PAUSED["state"])
    state["format"] = 99
    store = _stored(PAUSED["status"], PAUSED["stop_reason"], state)
    with pytest.raises(CheckpointMismatchError, match=r"has format 99; this routegate reads formats 1, 2"):
        cp.refund_plan(store).run(answer="yes")


def test_a_resumed_run_still_reads_a_step_that_ran_before_the_pause() -> None:
    from routegate.plan import Plan, Step, from_step, interrupt

    def ask(order: str) -> str:
        return f"{order} approved by {interrupt('approve?')}"

    def receipt(order: str) -> str:  # reads the first step, not the previous one
        return f"receipt for {order}"

    store = Store()
    plan = Plan(
        Step(str.upper, name="order"),
        Step(ask, name="ask"),
        Step(receipt, name="receipt", context=from_step("order")),
        store=store,
        checkpoint_key="restored-path",
    )
    assert plan.run("a-1").stop_reason == "interrupted"
    resumed = plan.run(answer="ann")
    assert (resumed.ok, resumed.output) == (True, "receipt for A-1")
    assert resumed.path == ("order", "ask", "receipt")


# -- stores written before the latest checkpoint became a head -------------------------------------------------------
STORES = json.loads(Path(__file__).with_name("data").joinpath("stores_whole_heads.json").read_text(encoding="utf-8"))
"""Rows of a SQLite store as the tree of 2026-12-02 (commit 3248116) wrote them, every latest checkpoint whole
(tests/plan/make_compat_stores.py): runs paused on a question (unsigned, signed, in a store keeping no history, a
fork), finished (unsigned, signed), and killed inside a step (keeping every checkpoint, 3, none)."""


def _load_stores(db: str) -> None:
    """Put the stored rows into the store ``db`` (a SQLite file, or a PostgreSQL schema of its own)."""
    Store(db=db).checkpoints.close()  # creates the tables
    runs, rows = STORES["plan_runs"], STORES["plan_history"]
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DELETE FROM routegate_plan_runs")
            conn.execute("DELETE FROM routegate_plan_history")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO routegate_plan_runs VALUES (%s, %s, %s, %s, %s::jsonb)", runs)
                cur.executemany("INSERT INTO routegate_plan_history VALUES (%s, %s, %s, %s, %s, %s::jsonb)", rows)
        return
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO plan_runs VALUES (?, ?, ?, ?, ?)", runs)
        conn.executemany("INSERT INTO plan_history VALUES (?, ?, ?, ?, ?, ?)", rows)


@pytest.fixture
def old_store(request: pytest.FixtureRequest, plan_db: str) -> str:
    """A store holding :data:`STORES`: a SQLite file, or a schema of its own in the test PostgreSQL."""
    if plan_db.startswith("postgresql://"):
        import psycopg

        schema = f"compat_{request.node.name.split('[')[0][-30:]}".lower()
        with psycopg.connect(plan_db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
        plan_db = f"{plan_db}{'&' if '?' in plan_db else '?'}options=-csearch_path%3D{schema}"
    _load_stores(plan_db)
    return plan_db


def _stored_head(store: Store, key: str) -> dict[str, Any]:
    """The row of ``key``'s latest checkpoint as the store holds it (a head, or written whole)."""
    backend: Any = store.checkpoints
    if hasattr(backend, "_conn"):
        row = backend._conn.execute(backend._LOAD_SQL, (key,)).fetchone()
        return json.loads(row[3])
    return json.loads(backend._rows[key][3])


@pytest.mark.parametrize("history", [True, False, 3])
def test_a_paused_run_stored_whole_resumes_with_its_answer_and_keeps_its_history(
    old_store: str, history: bool | int
) -> None:
    store = Store(db=old_store, history=history)
    try:
        assert _stored_head(store, "paused")["format"] == 2  # as the earlier release wrote it
        before = cp.refund_plan(store).history("paused")
        assert [c.at for c in before] == [1, 2, 3] and before.checkpoints[-1].status == "interrupted"
        result = cp.refund_plan(store).run(checkpoint_key="paused", answer="yes")
        assert (result.ok, result.output, result.path) == (
            True,
            "notified: refunded 250",
            ("classify", "refund", "notify"),
        )
        assert store["claim"] == cp.Claim(amount=250)
        assert _stored_head(store, "paused")["format"] == 4  # the new latest: a head
        after = cp.refund_plan(store).history("paused")
        if history is True:  # the old rows, then this attempt's: its first whole, then changes
            assert [c.at for c in after] == [1, 2, 3, 4, 5, 6]
            assert [c.step for c in after] == ["classify", "refund", "refund", "refund", "notify", None]
            assert all(c.problem is None for c in after)
        elif history is False:  # this attempt wrote path rows only: the old rows are listed as they were
            assert [(c.at, c.problem) for c in after] == [(1, None), (2, None), (3, None)]
        again = cp.refund_plan(store).run(checkpoint_key="paused")  # the stored result, rebuilt from the head
        assert (again.output, again.path) == (result.output, result.path)
    finally:
        store.close()


def test_a_signed_paused_run_stored_whole_resumes_and_an_edit_of_it_is_refused(old_store: str) -> None:
    store = Store(db=old_store, signing_key=STORES["secret"])
    try:
        record = store.checkpoints.load("paused-signed")
        assert record is not None and not record.state["sig"].startswith("c1:")  # the signature of before
        edited = copy.deepcopy(record.state)
        edited["answers"] = {edited["asked"]: ["yes"]}
        store.checkpoints.save("paused-signed", record.status, record.stop_reason, edited)
        with pytest.raises(CheckpointMismatchError, match="does not match its content"):
            cp.refund_plan(store).run(checkpoint_key="paused-signed")
        store.checkpoints.save("paused-signed", record.status, record.stop_reason, record.state)
        result = cp.refund_plan(store).run(checkpoint_key="paused-signed", answer="no")
        assert (result.ok, result.output) == (True, "notified: declined")
        latest = store.checkpoints.load("paused-signed")
        assert latest is not None and latest.state["sig"].startswith("c1:")  # signed anew, chained
        # a fork of a signed checkpoint of before: the old signature is checked on the rebuilt checkpoint
        forked = cp.refund_plan(store).fork("paused-signed", at=3, answer="yes")
        assert (forked.ok, forked.output) == (True, "notified: refunded 250")
    finally:
        store.close()


def test_finished_runs_stored_whole_return_their_results_without_running(old_store: str) -> None:
    for key, secret in (("done", None), ("done-signed", STORES["secret"])):
        store = Store(db=old_store, signing_key=secret)
        try:
            result = cp.loop_plan(store).run(checkpoint_key=key)
            assert (result.ok, result.output) == (True, "left=left:3 + right=right:3")
            assert result.path == ("start", "inc", "inc", "left", "right", "join")
            assert [c.at for c in cp.loop_plan(store).history(key)] == list(range(1, 9))
        finally:
            store.close()


def test_a_fork_stored_whole_resumes_and_names_its_parent(old_store: str) -> None:
    store = Store(db=old_store)
    try:
        result = cp.refund_plan(store).run(checkpoint_key="paused-fork", answer="yes")
        assert (result.ok, result.output) == (True, "notified: refunded 250")
        history = cp.refund_plan(store).history("paused-fork")
        assert history.parent is not None and (history.parent.key, history.parent.at) == ("paused", 2)
        assert history.checkpoints[0].route == "forked from paused at 2"
    finally:
        store.close()


@pytest.mark.parametrize(("key", "history"), [("crashed", True), ("crashed-bounded", 3), ("crashed-latest", False)])
def test_a_crashed_run_stored_whole_resumes_where_it_died(old_store: str, key: str, history: bool | int) -> None:
    store = Store(db=old_store, history=history)
    try:
        state = _stored_head(store, key)
        assert state["format"] == 2 and state["next"] == "tick" and state["iterations"] == 4
        result = cp.ticking_plan(store).run(checkpoint_key=key)
        assert (result.ok, result.output) == (True, "left:6")
        assert result.path == ("start", "tick", "tick", "tick", "tick", "tick", "tick", "left")
        listed = [c.at for c in cp.ticking_plan(store).history(key)]
        # the five rows of before, then this attempt's five; a bounded history keeps the latest 3 or more
        assert listed == {True: list(range(1, 11)), 3: [7, 8, 9, 10], False: []}[history]
    finally:
        store.close()


def test_the_plans_command_reads_a_store_written_whole_and_after_a_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from routegate.cli import main

    db = str(tmp_path / "old.sqlite")
    _load_stores(db)
    assert main(["plans", "show", "paused", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["path"], shown["question"]) == (
        "interrupted",
        ["classify", "refund"],
        {"approve_refund": 250},
    )
    store = Store(db=db)
    cp.refund_plan(store).run(checkpoint_key="paused", answer="yes")
    store.close()
    assert main(["plans", "show", "paused", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["path"]) == ("ended", ["classify", "refund", "notify"])
    assert main(["plans", "history", "paused", "--db", db, "--json"]) == 0
    assert [json.loads(line)["at"] for line in capsys.readouterr().out.splitlines()] == [1, 2, 3, 4, 5, 6]
    assert main(["plans", "list", "--db", db, "--json"]) == 0
    listed = {row["key"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(listed) == {r[0] for r in STORES["plan_runs"]}
    assert listed["paused"]["status"] == "ended" and listed["crashed"]["next"] == "tick"
