"""A durable run's history and time travel, on both stores: every checkpoint kept (and pruned when asked), listed
with ``plan.history(key)``; ``plan.fork(key, at=N)`` re-runs from checkpoint N as a new run naming its parent,
leaving the parent to resume as before; a historical checkpoint edited by a writer without the key (or off the
plan's graph) is refused; tables written before history existed are migrated and their runs keep resuming."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from routegate.errors import ConfigurationError
from routegate.plan import CheckpointMismatchError, Plan, Step, Store, interrupt, when

SECRET = "0123456789abcdef-history-signing-key"


class Count(BaseModel):
    n: int


def counting_plan(store: Store, ran: list[str], key: str | None = None) -> Plan[Any, Any]:
    """start → inc (looping while n < 3) → done; every step appends what it did to ``ran``."""

    def start(x: int) -> Count:
        ran.append(f"start:{x}")
        return Count(n=x)

    def inc(count: Count) -> Count:
        ran.append(f"inc:{count.n}")
        return Count(n=count.n + 1)

    def done(count: Count) -> str:
        ran.append(f"done:{count.n}")
        return f"done at {count.n}"

    return Plan(
        Step(start, output=Count),
        Step(inc, output=Count, routes={"inc": when.field("n").less_than(3)}),
        Step(done, output=str),
        store=store,
        checkpoint_key=key,
    )


def approval_plan(store: Store, ran: list[str]) -> Plan[Any, Any]:
    """take → approve (asks a person) → ship."""

    def take(amount: int) -> Count:
        ran.append(f"take:{amount}")
        return Count(n=amount)

    def approve(count: Count) -> Count:
        answer = interrupt({"approve": count.n})
        ran.append(f"approve:{count.n}:{answer}")
        return Count(n=count.n if answer == "yes" else 0)

    def ship(count: Count) -> str:
        ran.append(f"ship:{count.n}")
        return f"shipped {count.n}"

    return Plan(Step(take, output=Count), Step(approve, output=Count), Step(ship, output=str), store=store)


def _key() -> str:
    return f"run-{uuid.uuid4().hex[:8]}"


Opener = Callable[..., Store]


@pytest.fixture
def stores(plan_db: str) -> Iterator[Opener]:
    """``stores(**options)``: a Store on the test's database (SQLite or PostgreSQL), closed after the test."""
    opened: list[Store] = []

    def open_store(**options: Any) -> Store:
        store = Store(db=plan_db, **options)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


# -- the history ------------------------------------------------------------------------------------------------
def test_every_checkpoint_is_kept_and_listed_with_its_step_route_payload_and_hashes(stores: Opener) -> None:
    store, ran, key = stores(), [], _key()
    plan = counting_plan(store, ran)
    assert plan.run(0, checkpoint_key=key).output == "done at 3"
    history = plan.history(key)
    assert history.key == key and history.parent is None
    assert [c.at for c in history] == [1, 2, 3, 4, 5, 6]
    assert [c.step for c in history] == ["start", "inc", "inc", "inc", "done", None]
    assert [c.route for c in history] == [
        "start",
        "linear",
        "when.field('n').less_than(3)",
        "when.field('n').less_than(3)",
        "no route matched; linear",
        "success",
    ]
    assert [c.status for c in history] == ["running"] * 5 + ["ended"]
    assert [c.payload for c in history] == [0, {"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}, "done at 3"]
    assert history.at(2).size == len(b'{"n":0}')
    # each step's output is what the next checkpoint hands on
    for before, after in zip(history.checkpoints[:-2], history.checkpoints[1:-1], strict=True):
        assert before.output_hash == after.input_hash
    assert history.at(5).output_hash == history.at(6).output_hash is not None
    assert history.at(6).input_hash is None
    assert store.checkpoints.load(key) is not None


@pytest.mark.parametrize("backend", ["memory", "database"])
def test_runs_are_listed_whole_or_as_their_heads(stores: Opener, backend: str) -> None:
    """``runs()`` hands back each run's latest checkpoint whole; ``runs(whole=False)`` the row as stored, a head
    whose path is left in the history rows (what ``plans list`` reads)."""
    store, key = (Store() if backend == "memory" else stores()), _key()
    counting_plan(store, []).run(0, checkpoint_key=key)
    [whole] = [r for r in store.checkpoints.runs() if r.key == key]
    [head] = [r for r in store.checkpoints.runs(whole=False) if r.key == key]
    assert whole.state == store.checkpoints.load(key).state  # type: ignore[union-attr]
    assert len(whole.state["envelopes"]) == 4 and "envelopes" not in head.state  # the checkpoint before "done"
    assert (head.status, head.stop_reason, head.state["result"]["payload"]) == ("ended", "success", "done at 3")


def test_a_run_that_resumes_appends_to_the_same_history(stores: Opener) -> None:
    store, ran, key = stores(), [], _key()
    plan = approval_plan(store, ran)
    paused = plan.run(5, checkpoint_key=key)
    assert paused.stop_reason == "interrupted"
    assert [(c.step, c.route) for c in plan.history(key)][-1] == ("approve", "interrupted")
    assert plan.run(checkpoint_key=key, answer="yes").output == "shipped 5"
    steps = [(c.status, c.step) for c in plan.history(key)]
    assert steps == [
        ("running", "take"),
        ("running", "approve"),
        ("interrupted", "approve"),
        ("running", "approve"),  # the resume's first checkpoint: stored whole
        ("running", "ship"),
        ("ended", None),
    ]


def test_deleting_a_run_deletes_its_history(stores: Opener) -> None:
    store, key = stores(), _key()
    plan = counting_plan(store, [])
    plan.run(1, checkpoint_key=key)
    store.checkpoints.delete(key)
    assert store.checkpoints.load(key) is None
    assert len(plan.history(key)) == 0


def test_history_false_keeps_only_the_latest_checkpoint(stores: Opener) -> None:
    store, key = stores(history=False), _key()
    plan = counting_plan(store, [])
    assert plan.run(0, checkpoint_key=key).ok
    assert len(plan.history(key)) == 0
    with pytest.raises(ConfigurationError, match=r"has no checkpoint 2 \(it has no history in this store\)"):
        plan.fork(key, at=2)


def test_a_bounded_history_keeps_at_least_the_latest_n_and_every_kept_one_forks(stores: Opener) -> None:
    store, ran, key = stores(history=3), [], _key()
    plan = counting_plan(store, ran)
    assert plan.run(-6, checkpoint_key=key).output == "done at 3"  # 12 checkpoints written
    history = plan.history(key)
    numbers = [c.at for c in history]
    assert 3 <= len(numbers) <= 6 and numbers == list(range(numbers[0], 13))
    assert all(c.problem is None for c in history)
    oldest = numbers[0]
    forked = plan.fork(key, at=oldest)
    assert forked.ok and forked.output == "done at 3"


@pytest.mark.parametrize("bad", [0, -1, 2.5, "all", None])
def test_a_history_setting_that_is_not_a_bound_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Store\(history=.*\): give True"):
        Store(history=bad)  # type: ignore[arg-type]  # the test gives what a caller should not


@pytest.mark.parametrize("history", [True, False, 7])
def test_rows_are_stored_as_changes_so_a_long_runs_storage_grows_linearly(tmp_path: Path, history: bool | int) -> None:
    """Neither a history row nor the latest checkpoint's row holds the path so far: the latest is a head naming
    the rows its path is rebuilt from (path rows when the store keeps no history)."""
    db = str(tmp_path / "plans.sqlite")
    store, key = Store(db=db, history=history), _key()
    plan = Plan(*(Step(lambda n: n + 1, name=f"s{i}") for i in range(60)), store=store)
    assert plan.run(0, checkpoint_key=key).output == 60
    with sqlite3.connect(db) as conn:
        sizes = [len(s) for (s,) in conn.execute("SELECT state FROM plan_history WHERE key = ? ORDER BY seq", (key,))]
        head = len(conn.execute("SELECT state FROM plan_runs WHERE key = ?", (key,)).fetchone()[0])
    assert head < 600  # the latest checkpoint of a run of 60 steps: a head, without the path
    # every checkpoint (a path row when the store keeps no history, and for the rows a bounded history no longer
    # lists), each with its own envelope only; the first is whole (the path is empty)
    assert len(sizes) == 61 and max(sizes[:-1]) < 600
    assert sizes[-1] < 1000  # the end's result holds only what follows its checkpoint
    latest = store.checkpoints.load(key)
    assert latest is not None and latest.problem is None
    assert len(latest.state["envelopes"]) == 59 and len(latest.state["result"]["envelopes"]) == 60
    assert plan.run(0, checkpoint_key=key).output == 60  # the stored result, rebuilt
    assert len(plan.history(key)) == {True: 61, False: 0, 7: 12}[history]


@pytest.mark.parametrize("history", [True, False, 2])
@pytest.mark.parametrize("where", ["memory", "sqlite"])
def test_each_attempt_rebuilds_its_latest_from_its_own_rows_and_leaves_no_path_rows_behind(
    tmp_path: Path, where: str, history: bool | int
) -> None:
    from routegate.plan._deltas import PATH_ONLY

    store = Store(db=None if where == "memory" else tmp_path / "plans.sqlite", history=history)
    ran: list[str] = []
    key = _key()
    plan = approval_plan(store, ran)
    assert plan.run(5, checkpoint_key=key).stop_reason == "interrupted"
    paused = store.checkpoints.load(key)
    assert paused is not None and paused.problem is None and len(paused.state["envelopes"]) == 1
    assert plan.run(checkpoint_key=key, answer="yes").output == "shipped 5"
    rows = store.checkpoints.history(key)  # type: ignore[attr-defined]  # every backend here keeps rows
    path_rows = [seq for seq, record in rows if PATH_ONLY in record.state]
    listed = [c.at for c in plan.history(key)]
    if history is False:  # the first attempt's path rows went when the second wrote its first (whole) one
        assert path_rows == [seq for seq, _ in rows] == [4, 5, 6] and listed == []
    elif history == 2:  # pruned at 3 and 5: rows below 3 go; the second attempt starts whole at 4
        assert path_rows == [] and listed == [3, 4, 5, 6]
    else:
        assert path_rows == [] and listed == [1, 2, 3, 4, 5, 6]
    latest = store.checkpoints.load(key)
    assert latest is not None and latest.problem is None and latest.status == "ended"
    assert [e["s"] for e in latest.state["result"]["envelopes"]] == ["take", "approve", "ship"]
    ran.clear()
    assert plan.run(5, checkpoint_key=key).output == "shipped 5" and ran == []  # the stored result
    store.close()


def test_a_store_keeping_no_history_leaves_the_history_an_earlier_store_kept(tmp_path: Path) -> None:
    db, key, ran = tmp_path / "plans.sqlite", _key(), []
    keeping = Store(db=db)
    assert approval_plan(keeping, ran).run(5, checkpoint_key=key).stop_reason == "interrupted"
    keeping.close()
    latest_only = Store(db=db, history=False)
    assert approval_plan(latest_only, ran).run(checkpoint_key=key, answer="no").output == "shipped 0"
    latest_only.close()
    again = Store(db=db)
    history = approval_plan(again, ran).history(key)
    assert [(c.at, c.step, c.problem) for c in history] == [
        (1, "take", None),
        (2, "approve", None),
        (3, "approve", None),
    ]
    assert approval_plan(again, ran).run(checkpoint_key=key).output == "shipped 0"
    again.close()


def test_a_head_read_while_another_attempt_begins_is_read_again() -> None:
    """The head and the rows its path is in are two reads: a head read just before another attempt pruned its
    rows is read again instead of reported damaged."""
    store, ran, key = Store(history=False), [], _key()
    plan = approval_plan(store, ran)
    assert plan.run(5, checkpoint_key=key).stop_reason == "interrupted"
    backend: Any = store.checkpoints
    stale = backend._rows[key]
    assert plan.run(checkpoint_key=key, answer="yes").output == "shipped 5"  # its first row pruned the old path rows
    reads = iter([stale])

    class Racing(dict):  # type: ignore[type-arg]  # the first read sees the head as it was before the resume
        def get(self, k: str, default: Any = None) -> Any:
            return next(reads, None) or super().get(k, default)

    backend._rows = Racing(backend._rows)
    latest = store.checkpoints.load(key)
    assert latest is not None and latest.problem is None and latest.status == "ended"


# -- time travel --------------------------------------------------------------------------------------------------
def test_a_fork_reruns_from_a_checkpoint_as_a_new_run_that_names_its_parent(stores: Opener) -> None:
    store, ran, key = stores(), [], _key()
    plan = counting_plan(store, ran)
    plan.run(0, checkpoint_key=key)
    before = store.checkpoints.load(key)
    ran.clear()
    forked = plan.fork(key, at=4)
    assert forked.ok and forked.output == "done at 3"
    assert ran == ["inc:2", "done:3"]  # from checkpoint 4: inc on n=2, then done
    assert forked.path == ("start", "inc", "inc", "inc", "done")
    new = forked.checkpoint_key
    assert new is not None and new.startswith(f"{key}/at-4-")
    history = plan.history(new)
    assert (history.parent.key, history.parent.at, history.parent.edited) == (key, 4, False)  # type: ignore[union-attr]
    assert store.checkpoints.load(key) == before  # the parent is as it was
    assert len(plan.history(key)) == 6


def test_a_fork_of_a_paused_run_leaves_the_parent_to_resume_as_before(stores: Opener) -> None:
    store, ran, key = stores(signing_key=SECRET), [], _key()
    plan = approval_plan(store, ran)
    assert plan.run(7, checkpoint_key=key).stop_reason == "interrupted"
    paused_at = plan.history(key).checkpoints[-1].at
    fork = plan.fork(key, at=paused_at, answer="no", checkpoint_key=f"{key}-declined")
    assert fork.ok and fork.output == "shipped 0" and fork.checkpoint_key == f"{key}-declined"
    again = plan.fork(key, at=2, payload={"n": 9})  # the same question, on an edited amount: it asks again
    assert again.stop_reason == "interrupted" and again.question == {"approve": 9}
    ran.clear()
    parent = plan.run(checkpoint_key=key, answer="yes")  # the parent still resumes with its own answer
    assert parent.ok and parent.output == "shipped 7"
    assert ran == ["approve:7:yes", "ship:7"]
    assert plan.run(checkpoint_key=again.checkpoint_key, answer="yes").output == "shipped 9"


def test_a_fork_from_a_step_picks_the_latest_checkpoint_about_to_run_it(stores: Opener) -> None:
    store, ran, key = stores(), [], _key()
    plan = counting_plan(store, ran)
    plan.run(0, checkpoint_key=key)
    ran.clear()
    assert plan.fork(key, step="done").output == "done at 3"
    assert ran == ["done:3"]
    with pytest.raises(ConfigurationError, match=r"no checkpoint of the run .* is about to run step 'nowhere'"):
        plan.fork(key, step="nowhere")
    with pytest.raises(ConfigurationError, match=r"at= .* or step= .*, one of them"):
        plan.fork(key, at=2, step="done")


def test_an_edited_payload_is_validated_against_both_steps_types(stores: Opener) -> None:
    store, ran, key = stores(), [], _key()
    plan = counting_plan(store, ran)
    plan.run(0, checkpoint_key=key)
    ran.clear()
    edited = plan.fork(key, at=3, payload={"n": 2})
    assert edited.ok and ran == ["inc:2", "done:3"]
    assert plan.history(edited.checkpoint_key).parent.edited  # type: ignore[arg-type,union-attr]
    with pytest.raises(ConfigurationError, match=r"does not validate as the output type of 'inc'.*n: Input should"):
        plan.fork(key, at=3, payload={"n": "many"})
    first = plan.fork(key, at=1, payload=2)  # the run's input, before the first step
    assert first.output == "done at 3" and first.path == ("start", "inc", "done")

    def shout(text: str) -> str:
        return text.upper()

    typed = Plan(Step(lambda x: x, name="echo"), Step(shout), store=store)
    typed.run("hi", checkpoint_key=f"{key}-typed")
    with pytest.raises(ConfigurationError, match=r"the payload is not a str, the input type of step 'shout'"):
        typed.fork(f"{key}-typed", at=2, payload={"not": "text"})
    assert typed.fork(f"{key}-typed", at=2, payload="bye").output == "BYE"


def test_a_successful_end_is_not_a_place_to_fork_from(stores: Opener) -> None:
    store, key = stores(), _key()
    plan = counting_plan(store, [])
    plan.run(0, checkpoint_key=key)
    with pytest.raises(ConfigurationError, match="is the end of a successful run"):
        plan.fork(key, at=6)
    with pytest.raises(ConfigurationError, match=r"has no checkpoint 99 \(its history holds 1 to 6\)"):
        plan.fork(key, at=99)


# -- a tampered historical checkpoint -----------------------------------------------------------------------------
@contextmanager
def _rows(db: str, key: str) -> Iterator[Callable[[int, Callable[[dict[str, Any]], None]], None]]:
    """The attacker's tool: edit history row ``seq`` of ``key`` in place, with SQL."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:

            def edit_pg(seq: int, change: Callable[[dict[str, Any]], None]) -> None:
                sql = "SELECT state FROM routegate_plan_history WHERE key = %s AND seq = %s"
                row = conn.execute(sql, (key, seq)).fetchone()
                assert row is not None
                state = row[0]
                change(state)
                conn.execute(
                    "UPDATE routegate_plan_history SET state = %s::jsonb WHERE key = %s AND seq = %s",
                    (json.dumps(state), key, seq),
                )

            yield edit_pg
        return
    with sqlite3.connect(db) as conn:

        def edit_sqlite(seq: int, change: Callable[[dict[str, Any]], None]) -> None:
            sql = "SELECT state FROM plan_history WHERE key = ? AND seq = ?"
            state = json.loads(conn.execute(sql, (key, seq)).fetchone()[0])
            change(state)
            conn.execute("UPDATE plan_history SET state = ? WHERE key = ? AND seq = ?", (json.dumps(state), key, seq))
            conn.commit()

        yield edit_sqlite


def test_a_tampered_historical_checkpoint_is_refused_and_so_is_every_checkpoint_carrying_it(
    stores: Opener, plan_db: str
) -> None:
    store, ran, key = stores(signing_key=SECRET), [], _key()
    plan = approval_plan(store, ran)
    plan.run(3, checkpoint_key=key)  # paused at checkpoint 3

    def bigger(state: dict[str, Any]) -> None:  # checkpoint 2's envelope of take: an amount of 300
        state["envelopes"][-1]["p"] = {"n": 300}
        state["prev"] = {"v": {"n": 300}}

    with _rows(plan_db, key) as edit:
        edit(2, bigger)
    ran.clear()
    for at in (2, 3):  # checkpoint 3 carries checkpoint 2's envelope on: it is refused too
        with pytest.raises(CheckpointMismatchError, match="does not match its content"):
            plan.fork(key, at=at, answer="yes")
    assert ran == []
    assert plan.fork(key, at=1).stop_reason == "interrupted"  # the checkpoint before the edit is intact
    # the latest checkpoint (3) is rebuilt from the same rows: it carries the edited envelope and is refused too
    with pytest.raises(CheckpointMismatchError, match="does not match its content"):
        plan.run(checkpoint_key=key, answer="yes")
    assert ran == ["take:3"]  # only the fork from checkpoint 1 ran (to the question)


def test_an_unsigned_historical_checkpoint_off_the_plans_graph_is_refused(stores: Opener, plan_db: str) -> None:
    store, ran, key = stores(), [], _key()
    plan = counting_plan(store, ran)
    plan.run(0, checkpoint_key=key)

    def skip(state: dict[str, Any]) -> None:
        state["next"], state["at"] = "done", 2

    with _rows(plan_db, key) as edit:
        edit(3, skip)
    ran.clear()
    with pytest.raises(CheckpointMismatchError, match="is damaged or was edited"):
        plan.fork(key, at=3)
    assert ran == []


def test_a_history_row_that_cannot_be_read_is_named_and_the_rows_after_it_wait_for_a_whole_one(tmp_path: Path) -> None:
    db = str(tmp_path / "plans.sqlite")
    store, ran, key = Store(db=db), [], _key()
    plan = approval_plan(store, ran)
    plan.run(4, checkpoint_key=key)
    plan.run(checkpoint_key=key, answer="yes")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE plan_history SET state = '[1' WHERE key = ? AND seq = 2", (key,))
    history = plan.history(key)
    problems = [(c.at, c.problem is not None) for c in history]
    assert problems == [(1, False), (2, True), (3, True), (4, False), (5, False), (6, False)]
    assert "is not JSON" in (history.at(2).problem or "")
    assert "missing or damaged" in (history.at(3).problem or "")
    with pytest.raises(CheckpointMismatchError, match=r"checkpoint 3 of .* cannot be rebuilt"):
        plan.fork(key, at=3)


# -- migration of tables written before history -------------------------------------------------------------------
MAIN_SQLITE = """
CREATE TABLE IF NOT EXISTS plan_runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated REAL NOT NULL,
    state TEXT NOT NULL
)
"""
MAIN_POSTGRES = """
CREATE TABLE IF NOT EXISTS routegate_plan_runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    state JSONB NOT NULL
)
"""


def _paused_document() -> tuple[str, str, dict[str, Any]]:
    """A paused run's checkpoint as main wrote it: a run in memory with no history kept (main's code path)."""
    memory = Store(history=False)
    approval_plan(memory, []).run(8, checkpoint_key="legacy")
    record = memory.checkpoints.load("legacy")
    assert record is not None and record.state["format"] == 2 and "parent" not in record.state
    return record.status, record.stop_reason, record.state


def test_a_sqlite_store_written_before_history_is_migrated_and_its_run_resumes(tmp_path: Path) -> None:
    db = str(tmp_path / "legacy.sqlite")
    status, reason, state = _paused_document()
    with sqlite3.connect(db) as conn:
        conn.execute(MAIN_SQLITE)
        conn.execute(
            "INSERT INTO plan_runs (key, status, stop_reason, updated, state) VALUES (?, ?, ?, ?, ?)",
            ("legacy", status, reason, 1.0, json.dumps(state)),
        )
    _resumes_after_migration(db)


@pytest.mark.integration
def test_a_postgres_store_written_before_history_is_migrated_and_its_run_resumes(plan_pg_url: str) -> None:
    import psycopg

    schema = f"legacy_{uuid.uuid4().hex[:8]}"
    status, reason, state = _paused_document()
    with psycopg.connect(plan_pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(MAIN_POSTGRES)
        conn.execute(
            "INSERT INTO routegate_plan_runs (key, status, stop_reason, updated, state) VALUES (%s, %s, %s, %s, %s)",
            ("legacy", status, reason, 1.0, json.dumps(state)),
        )
    separator = "&" if "?" in plan_pg_url else "?"
    _resumes_after_migration(f"{plan_pg_url}{separator}options=-csearch_path%3D{schema}")


def _resumes_after_migration(db: str) -> None:
    store, ran = Store(db=db), []
    try:
        _resumes(store, ran)
    finally:
        store.close()
    again = Store(db=db)  # a second open finds the table and migrates nothing again
    try:
        assert len(approval_plan(again, []).history("legacy")) == 4
    finally:
        again.close()


def _resumes(store: Store, ran: list[str]) -> None:
    plan = approval_plan(store, ran)
    history = plan.history("legacy")
    assert [(c.at, c.status, c.step) for c in history] == [(1, "interrupted", "approve")]  # its latest, migrated
    done = plan.run(checkpoint_key="legacy", answer="yes")
    assert done.ok and done.output == "shipped 8" and ran == ["approve:8:yes", "ship:8"]
    assert [c.at for c in plan.history("legacy")] == [1, 2, 3, 4]
    assert plan.fork("legacy", at=1, answer="no", checkpoint_key="legacy-no").output == "shipped 0"


def test_the_plan_of_a_runtime_refuses_to_fork_before_writing_anything() -> None:
    from routegate.core import RunContext
    from routegate.plan import PlanResult, Runtime

    class Echo(Runtime[Any, Any]):
        def result(self, state: Any, ended: PlanResult[Any], ctx: RunContext[Any]) -> Any:
            return ended

    store = Store()
    plan = Plan(Step(lambda x: x, name="echo"), store=store, runtime=Echo())
    with pytest.raises(ConfigurationError, match="run the runtime instead"):
        plan.fork("any", at=1)
    assert store.checkpoints.runs() == []
