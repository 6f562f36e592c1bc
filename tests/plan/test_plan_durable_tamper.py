"""Checkpoints are untrusted input: whoever can write the checkpoint database edits a paused run's row, and the
resume must refuse what the plan could not have written — before any step runs — or, with a signing key, anything
written without the key. Rows are edited with SQL, the way such a writer would.

The store keeps a run's latest checkpoint as a head whose path is in its history rows; the attacker here reads the
checkpoint whole and writes it back whole into the run's row (a whole latest checkpoint is still read, as stores
written before heads hold them). Editing the head or the history rows themselves is at the end of this file."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.errors import RoutegateError, RuntimeFaultError
from routegate.plan import CheckpointMismatchError, Plan, Step, Store, interrupt, when

KEY = "refund-7"
SECRET = "0123456789abcdef-test-signing-key"


class Claim(BaseModel):
    amount: int


def refund_plan(store: Store, ran: list[str]) -> Plan:
    """classify routes a positive claim to ``refund`` (which asks a person first) and others to ``reject``; both
    rejoin at ``notify``. Every step appends its name to ``ran`` when it executes."""

    def classify(raw: Any) -> Claim:
        ran.append("classify")
        return Claim(amount=int(raw))

    def refund(claim: Claim) -> str:
        ran.append("refund")
        answer = interrupt({"approve_refund": claim.amount})
        ran.append(f"refund:{answer}")
        return f"refunded {claim.amount}" if answer == "yes" else "declined"

    def reject(claim: Claim) -> str:
        ran.append("reject")
        return "rejected"

    def notify(outcome: str) -> str:
        ran.append("notify")
        return f"notified: {outcome}"

    return Plan(
        Step(
            classify,
            output=Claim,
            routes={"refund": when.field("amount").greater_than(0), "reject": when.field("amount").less_than(1)},
            after_branches="notify",
        ),
        Step(refund, output=str),
        Step(reject, output=str),
        Step(notify, output=str),
        store=store,
        checkpoint_key=KEY,
    )


# -- the attacker's tools: the raw row ------------------------------------------------------------------------------
def read_row(db: str) -> tuple[str, dict[str, Any]]:
    """The run's status and its latest checkpoint whole (rebuilt from its head and history rows, as anyone with the
    rows and the code can)."""
    status, state = read_head(db)
    if state.get("format") == 4:
        store = Store(db=db)
        try:
            record = store.checkpoints.load(KEY)
        finally:
            store.close()
        assert record is not None and record.problem is None
        state = record.state
    return status, state


def read_head(db: str) -> tuple[str, dict[str, Any]]:
    """The run's row as stored: its status and document (a head, or a checkpoint written whole)."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            row = conn.execute("SELECT status, state FROM routegate_plan_runs WHERE key = %s", (KEY,)).fetchone()
        assert row is not None
        return row[0], row[1]
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT status, state FROM plan_runs WHERE key = ?", (KEY,)).fetchone()
    return found[0], json.loads(found[1])


def write_row(db: str, text: str, status: str | None = None) -> None:
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(
                "UPDATE routegate_plan_runs SET state = %s::jsonb, status = COALESCE(%s, status) WHERE key = %s",
                (text, status, KEY),
            )
        return
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE plan_runs SET state = ?, status = COALESCE(?, status) WHERE key = ?", (text, status, KEY))


def edit(db: str, change: Callable[[dict[str, Any]], None]) -> None:
    _, state = read_row(db)
    change(state)
    write_row(db, json.dumps(state))


@pytest.fixture
def paused(plan_db: str) -> Iterator[tuple[str, list[str]]]:
    """A refund of 250 paused on its approval question, in a fresh database; and the list of executed steps."""
    ran: list[str] = []
    store = Store(db=plan_db)
    store.checkpoints.delete(KEY)  # the PostgreSQL database is shared by the tests
    try:
        first = refund_plan(store, ran).run(250)
        assert (first.stop_reason, first.question) == ("interrupted", {"approve_refund": 250})
        assert ran == ["classify", "refund"]
        ran.clear()
        yield plan_db, ran
    finally:
        store.close()


def resume(db: str, ran: list[str], *, signing_key: str | None = None, **kwargs: Any) -> Any:
    store = Store(db=db) if signing_key is None else Store(db=db, signing_key=signing_key)
    try:
        return refund_plan(store, ran).run(**kwargs)
    finally:
        store.close()


def _rejoin_dropped(state: dict[str, Any]) -> None:
    state["rejoin"] = -1


def _decisions_emptied(state: dict[str, Any]) -> None:
    state["decisions"] = []


def _next_is_reject(state: dict[str, Any]) -> None:  # the branch the routing did not choose
    state["at"], state["next"] = 2, "reject"


def _path_rewritten(state: dict[str, Any]) -> None:  # a decision to a step classify cannot route to
    state["decisions"][0][0] = "notify"
    state["at"], state["next"], state["rejoin"] = 3, "notify", -1


def _answer_for_another_step(state: dict[str, Any]) -> None:
    state["answers"] = {f"{KEY}/2/reject": ["yes"]}


def _step_count(state: dict[str, Any]) -> None:
    state["iterations"] = 0


def _envelope_renamed(state: dict[str, Any]) -> None:
    state["envelopes"][0]["s"] = "reject"


def _payload_of_wrong_type(state: dict[str, Any]) -> None:
    state["envelopes"][0]["p"] = {"amount": "a lot"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_decisions_emptied, "no routing decision after 'classify'"),
        (_rejoin_dropped, "pending rejoin is none"),
        (_next_is_reject, "resumes at 'reject', but its path and decisions lead to 'refund'"),
        (_path_rewritten, "goes to 'notify', which the plan's routing cannot choose"),
        (_answer_for_another_step, "not the step about to run"),
        (_step_count, "counts 0 steps run, but its path holds 1"),
        (_envelope_renamed, "step 1 of its path is 'reject'"),
        (_payload_of_wrong_type, "payload of step 'classify' does not validate"),
    ],
)
def test_an_inconsistent_checkpoint_is_refused_before_any_step_runs(
    paused: tuple[str, list[str]], change: Callable[[dict[str, Any]], None], says: str
) -> None:
    db, ran = paused
    edit(db, change)
    with pytest.raises(CheckpointMismatchError) as refused:
        resume(db, ran, answer="yes")
    assert str(refused.value).startswith(f"the checkpoint of {KEY!r} is damaged or was edited: ")
    assert says in str(refused.value) and str(refused.value).count("the checkpoint of") == 1
    assert isinstance(refused.value, RoutegateError)
    assert ran == []
    with pytest.raises(CheckpointMismatchError):  # refused again: nothing was half-resumed or rewritten
        resume(db, ran)
    assert ran == []


def test_an_unknown_format_is_refused_naming_it(paused: tuple[str, list[str]]) -> None:
    db, ran = paused
    edit(db, lambda state: state.update(format=99))
    with pytest.raises(CheckpointMismatchError, match="has format 99; this routegate reads formats 1, 2"):
        resume(db, ran, answer="yes")
    assert ran == []


def test_a_truncated_document_is_refused_as_unreadable(tmp_path: Path) -> None:
    db = str(tmp_path / "plans.sqlite")
    ran: list[str] = []
    store = Store(db=db)
    refund_plan(store, ran).run(250)
    store.close()
    _, state = read_row(db)
    write_row(db, json.dumps(state)[:-40])
    ran.clear()
    with pytest.raises(CheckpointMismatchError, match=f"the checkpoint of {KEY!r} cannot be read: its document is not"):
        resume(db, ran)
    assert ran == []


def test_an_untouched_checkpoint_still_resumes(paused: tuple[str, list[str]]) -> None:
    db, ran = paused
    done = resume(db, ran, answer="yes")
    assert (done.stop_reason, done.output, done.path) == (
        "success",
        "notified: refunded 250",
        ("classify", "refund", "notify"),
    )
    assert ran == ["refund", "refund:yes", "notify"]


def test_a_format_1_checkpoint_resumes_without_a_key_and_is_refused_with_one(paused: tuple[str, list[str]]) -> None:
    """Checkpoints written before signing existed (format 1, no "sig")."""
    db, ran = paused
    edit(db, lambda state: state.update(format=1))
    with pytest.raises(CheckpointMismatchError, match=r"\(format 1\) is not signed"):
        resume(db, ran, signing_key=SECRET, answer="yes")
    assert ran == []
    done = resume(db, ran, answer="yes")
    assert done.output == "notified: refunded 250" and ran == ["refund", "refund:yes", "notify"]


# -- signed checkpoints --------------------------------------------------------------------------------------------
@pytest.fixture
def signed(plan_db: str) -> Iterator[tuple[str, list[str]]]:
    """Like ``paused``, written through a store with a signing key."""
    ran: list[str] = []
    store = Store(db=plan_db, signing_key=SECRET)
    store.checkpoints.delete(KEY)  # the PostgreSQL database is shared by the tests
    try:
        assert refund_plan(store, ran).run(250).stop_reason == "interrupted"
        ran.clear()
        yield plan_db, ran
    finally:
        store.close()


def test_a_forged_interrupt_answer_is_refused_when_checkpoints_are_signed(signed: tuple[str, list[str]]) -> None:
    db, ran = signed
    original = read_row(db)[1]
    edit(db, lambda state: state.update(answers={state["asked"]: ["yes"]}))
    with pytest.raises(CheckpointMismatchError, match="signature of the checkpoint of 'refund-7' does not match"):
        resume(db, ran, signing_key=SECRET)
    assert ran == []

    edit(db, lambda state: state.clear() or state.update(original))  # the person's answer, given through the API
    done = resume(db, ran, signing_key=SECRET, answer="no")
    assert (done.output, ran) == ("notified: declined", ["refund", "refund:no", "notify"])


def _switched_to_the_sibling_branch(state: dict[str, Any]) -> None:
    """A forgery that stays on the plan's graph: classify "chose" reject, with a payload that routes there."""
    state["envelopes"][0]["p"] = {"amount": 0}
    state["decisions"][0][0] = "reject"
    state["at"], state["next"], state["prev"] = 2, "reject", {"v": {"amount": 0}}
    state["answers"], state["asked"] = {f"{KEY}/2/reject": []}, f"{KEY}/2/reject"
    state["result"]["error"]["key"] = f"{KEY}/2/reject"


def test_a_forgery_that_stays_on_the_graph_is_refused_when_signed(signed: tuple[str, list[str]]) -> None:
    db, ran = signed
    edit(db, _switched_to_the_sibling_branch)
    with pytest.raises(CheckpointMismatchError, match="does not match its content"):
        resume(db, ran, signing_key=SECRET)
    assert ran == []


def test_a_signed_checkpoint_is_bound_to_its_key_status_and_signer(signed: tuple[str, list[str]]) -> None:
    db, ran = signed
    status, state = read_row(db)
    write_row(db, json.dumps(state), status="running")  # the same document under another status
    with pytest.raises(CheckpointMismatchError, match="does not match"):
        resume(db, ran, signing_key=SECRET)
    write_row(db, json.dumps(state), status=status)
    with pytest.raises(CheckpointMismatchError, match="does not match"):
        resume(db, ran, signing_key="another key, also long enough")
    assert ran == []
    assert resume(db, ran, signing_key=SECRET, answer="yes").output == "notified: refunded 250"


def test_signatures_survive_every_backend_with_awkward_numbers(plan_db: str) -> None:
    """PostgreSQL's jsonb reorders keys and rewrites numbers (1e16 comes back as an integer): a signed checkpoint
    still verifies."""
    payload = {"big": 1e16, "tiny": 1.5e-7, "zero": -0.0, "huge": 2**80, "z": "ä\u2028", "a": [0.1, 10, 1.0]}

    def build(store: Store, ran: list[str]) -> Plan:
        def first(x: Any) -> Any:
            ran.append("first")
            return payload

        def second(x: Any) -> Any:
            ran.append("second")
            return {"echo": x, "answer": interrupt("ok?")}

        return Plan(Step(first), Step(second), store=store, checkpoint_key="numbers")

    ran: list[str] = []
    store = Store(db=plan_db, signing_key=SECRET)
    try:
        store.checkpoints.delete("numbers")
        assert build(store, ran).run(1).stop_reason == "interrupted"
    finally:
        store.close()
    again = Store(db=plan_db, signing_key=SECRET)
    try:
        done = build(again, ran).run(answer="fine")
    finally:
        again.checkpoints.delete("numbers")
        again.close()
    assert done.ok and done.output["answer"] == "fine" and done.output["echo"]["z"] == "ä\u2028"
    assert ran == ["first", "second", "second"]


def test_a_short_signing_key_is_refused() -> None:
    with pytest.raises(ValueError, match="signing_key must be at least 16 bytes, got 5"):
        Store(signing_key="short")


# -- the property: an edited checkpoint resumes identically or is refused ------------------------------------------
def branch_plan(store: Store, ran: list[str]) -> Plan:
    """classify → left (or right) → join → a parallel band → final, which fails on its first call."""

    failed: list[str] = []

    def step(name: str, fail_once: bool = False) -> Callable[[Any], str]:
        def run(x: Any) -> str:
            ran.append(name)
            if fail_once and not failed:
                failed.append(name)
                raise ConnectionError("upstream down")
            return name

        run.__name__ = run.__qualname__ = name
        return run

    def classify(x: Any) -> Claim:
        ran.append("classify")
        return Claim(amount=5)

    return Plan(
        Step(
            classify,
            output=Claim,
            routes={"left": when.field("amount").greater_than(0), "right": when.field("amount").less_than(1)},
            after_branches="join",
        ),
        Step(step("left"), output=str),
        Step(step("right"), output=str),
        Step(step("join"), output=str),
        Step(step("p1"), output=str, parallel=True),
        Step(step("p2"), output=str, parallel=True),
        Step(step("final", fail_once=True), output=str),
        store=store,
        checkpoint_key=KEY,
    )


_NAMES = ["classify", "left", "right", "join", "p1", "p2", "final", "refund", "notify"]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 9)
    | st.floats(allow_nan=False)
    | st.sampled_from(_NAMES)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=5,
)


@st.composite
def mutation(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with one node (a field, or something nested in it) replaced, removed, or given a new sibling."""
    doc = copy.deepcopy(doc)
    parent: Any = doc
    key: Any = draw(st.sampled_from(sorted(doc)))
    while isinstance(parent[key], dict | list) and parent[key] and draw(st.booleans()):
        parent = parent[key]
        key = draw(st.sampled_from(sorted(parent) if isinstance(parent, dict) else range(len(parent))))
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "replace":
        parent[key] = draw(_JSON)
    elif action == "remove":
        del parent[key]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=6))] = draw(_JSON)
    else:
        parent.insert(key, draw(_JSON))
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_edited_checkpoint_resumes_identically_or_is_refused(data: st.DataObject) -> None:
    def edited_checkpoint(db: str) -> None:
        _, state = read_row(db)
        status = data.draw(st.sampled_from([None, None, "running", "interrupted", "ended", "paused"]))
        write_row(db, json.dumps(data.draw(mutation(state))), status=status)

    _stopped_edited_resumed(edited_checkpoint)


def _stopped_edited_resumed(edit: Callable[[str], None]) -> None:
    """A durable run stopped by a fault, its store edited by ``edit(db)``, then resumed: as before, or refused."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "plans.sqlite")
        ran: list[str] = []
        store = Store(db=db)
        try:
            plan = branch_plan(store, ran)
            assert plan.run(0).stop_reason == "step_error:ConnectionError"
            edit(db)
            _resumed_as_before_or_refused(plan, ran)
        finally:
            store.close()


def _resumed_as_before_or_refused(plan: Plan[Any, Any], ran: list[str]) -> None:
    """The branch plan's failed run, resumed after an edit: refused before any step ran, or exactly the original
    resume (the failed step once more, on the same path)."""
    ran.clear()
    refusal = ""
    try:
        done = plan.run()
    except CheckpointMismatchError as exc:
        refusal = str(exc)
    if refusal:
        assert f"checkpoint of {KEY!r}" in refusal
        assert ran == []
        return
    assert ran == ["final"]
    assert done.path == ("classify", "left", "join", "p1", "p2", "final")
    assert (done.stop_reason, done.output) == ("success", "final")


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_with_a_signing_key_every_edit_is_refused(data: st.DataObject) -> None:
    def edited_checkpoint(db: str) -> None:
        _, state = read_row(db)
        write_row(db, json.dumps(data.draw(mutation(state))))

    _signed_paused_edited_resumed(edited_checkpoint)


def _signed_paused_edited_resumed(edit: Callable[[str], None]) -> None:
    """A signed durable run paused at its question, its store edited by ``edit(db)``, then resumed: refused, or
    unchanged when the edit changed nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "plans.sqlite")
        ran: list[str] = []
        store = Store(db=db, signing_key=SECRET)
        try:
            assert refund_plan(store, ran).run(250).stop_reason == "interrupted"
            edit(db)
            _signed_run_refused_or_unchanged(store, ran)
        finally:
            store.close()


def _signed_run_refused_or_unchanged(store: Store, ran: list[str]) -> None:
    """The paused refund, resumed after an edit of its signed checkpoint: refused before any step ran, or (an edit
    that changes nothing the signature covers, 1 for 1.0) the same question again."""
    ran.clear()
    try:
        done = refund_plan(store, ran).run()
    except CheckpointMismatchError:
        assert ran == []
        return
    assert (done.stop_reason, done.question, ran) == ("interrupted", {"approve_refund": 250}, ["refund"])


# -- lease files ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target_exists", [True, False])
def test_a_symlink_planted_at_the_lease_path_is_refused_not_followed(tmp_path: Path, target_exists: bool) -> None:
    db = tmp_path / "plans.sqlite"
    locks = Path(f"{db}.locks")
    locks.mkdir()
    victim = tmp_path / "victim.txt"
    if target_exists:
        victim.write_text("precious", encoding="utf-8")
    before = victim.stat() if target_exists else None
    (locks / hashlib.sha256(KEY.encode()).hexdigest()[:32]).symlink_to(victim)
    ran: list[str] = []
    store = Store(db=db)
    try:
        with pytest.raises(RuntimeFaultError, match="is a symbolic link; routegate does not follow links there"):
            refund_plan(store, ran).run(250)
    finally:
        store.close()
    assert ran == []
    if before is None:
        assert not victim.exists()
    else:
        after = victim.stat()
        assert victim.read_text(encoding="utf-8") == "precious"
        assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)


def test_a_symlinked_lock_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = tmp_path / "plans.sqlite"
    Path(f"{db}.locks").symlink_to(elsewhere, target_is_directory=True)
    store = Store(db=db)
    try:
        with pytest.raises(RuntimeFaultError, match=r"lock directory .* is a symbolic link"):
            refund_plan(store, []).run(250)
    finally:
        store.close()
    assert list(elsewhere.iterdir()) == []


_STORED_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@pytest.mark.integration
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=_STORED_JSON)
def test_a_signed_checkpoint_of_any_json_payload_verifies_after_postgres(plan_pg_url: str, payload: Any) -> None:
    """jsonb reorders keys and rewrites numbers; the signature of whatever the steps produced still holds."""

    def build(store: Store) -> Plan:
        return Plan(
            Step(lambda x: payload, name="produce"),
            Step(lambda x: [x, interrupt("ok?")], name="ask"),
            store=store,
            checkpoint_key="any-json",
        )

    store = Store(db=plan_pg_url, signing_key=SECRET)
    try:
        store.checkpoints.delete("any-json")
        assert build(store).run(0).stop_reason == "interrupted"
        done = build(store).run(answer="yes")
        assert done.ok and done.output[1] == "yes"
    finally:
        store.checkpoints.delete("any-json")
        store.close()


def test_a_finished_run_with_an_edited_result_is_refused(plan_db: str) -> None:
    ran: list[str] = []
    store = Store(db=plan_db)
    store.checkpoints.delete(KEY)
    try:
        assert refund_plan(store, ran).run(0).output == "notified: rejected"
    finally:
        store.close()
    edit(plan_db, lambda state: state["result"].update(payload={"not": "a string"}))
    with pytest.raises(CheckpointMismatchError, match="stored result does not validate"):
        resume(plan_db, ran)
    edit(plan_db, lambda state: state["result"]["envelopes"].pop() and state["result"]["decisions"].pop())
    with pytest.raises(CheckpointMismatchError, match="marked successful but its path stops before the plan's end"):
        resume(plan_db, ran)
    assert ran == ["classify", "reject", "notify"]  # only the first run's steps


def test_a_run_paused_by_raising_interrupt_still_resumes(tmp_path: Path) -> None:
    """``raise Interrupt(question)`` pauses without a key for an answer; its checkpoint is consistent too."""
    from routegate.plan import Interrupt

    asked: list[int] = []

    def gate(x: int) -> int:
        asked.append(x)
        if len(asked) == 1:
            raise Interrupt("hold on")
        return x * 2

    store = Store(db=tmp_path / "plans.sqlite")
    try:
        plan = Plan(Step(gate), store=store, checkpoint_key="gate")
        assert plan.run(21).stop_reason == "interrupted"
        assert plan.run().output == 42
    finally:
        store.close()
    assert asked == [21, 21]


# -- the rows themselves: a head and the history rows its path is rebuilt from ---------------------------------------
def _rows_of(db: str) -> dict[int, dict[str, Any]]:
    """The run's stored documents: 0 for its head (the row of its latest checkpoint), N for history row N."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            rows = conn.execute("SELECT seq, state FROM routegate_plan_history WHERE key = %s", (KEY,)).fetchall()
        found = dict(rows)
    else:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT seq, state FROM plan_history WHERE key = ?", (KEY,)).fetchall()
        found = {seq: json.loads(text) for seq, text in rows}
    return {0: read_head(db)[1], **found}


def _write(db: str, seq: int, doc: dict[str, Any] | None) -> None:
    """Replace (``None``: delete) the run's document ``seq`` (0: its head), with SQL."""
    if seq == 0:
        assert doc is not None
        write_row(db, json.dumps(doc))
        return
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            if doc is None:
                conn.execute("DELETE FROM routegate_plan_history WHERE key = %s AND seq = %s", (KEY, seq))
            else:
                sql = "UPDATE routegate_plan_history SET state = %s::jsonb WHERE key = %s AND seq = %s"
                conn.execute(sql, (json.dumps(doc), KEY, seq))
        return
    with sqlite3.connect(db) as conn:
        if doc is None:
            conn.execute("DELETE FROM plan_history WHERE key = ? AND seq = ?", (KEY, seq))
        else:
            conn.execute("UPDATE plan_history SET state = ? WHERE key = ? AND seq = ?", (json.dumps(doc), KEY, seq))


def test_the_latest_checkpoint_is_a_head_naming_the_rows_of_its_path(paused: tuple[str, list[str]]) -> None:
    db, _ = paused
    rows = _rows_of(db)
    head = rows[0]
    assert head["format"] == 4 and head["of"] == 2 and head["path"] == [1, 3, 1, 1]
    assert "envelopes" not in head and "decisions" not in head
    assert [rows[n]["envelopes"] for n in (1, 2, 3)] == [[], [read_row(db)[1]["envelopes"][0]], []]


def test_an_edited_head_or_path_row_is_refused_when_signed(signed: tuple[str, list[str]]) -> None:
    db, ran = signed
    rows = _rows_of(db)
    head, row = copy.deepcopy(rows[0]), copy.deepcopy(rows[2])  # row 2 adds classify's envelope to the path
    head["answers"] = {head["asked"]: ["yes"]}
    _write(db, 0, head)
    with pytest.raises(CheckpointMismatchError, match="does not match its content"):
        resume(db, ran, signing_key=SECRET)
    _write(db, 0, rows[0])
    row["envelopes"][0]["p"] = {"amount": 1}
    _write(db, 2, row)
    with pytest.raises(CheckpointMismatchError, match="does not match its content"):
        resume(db, ran, signing_key=SECRET)
    _write(db, 2, rows[2])
    assert ran == []
    assert resume(db, ran, signing_key=SECRET, answer="yes").output == "notified: refunded 250"


def _renamed(row: dict[str, Any]) -> None:
    row["envelopes"][0]["s"] = "reject"


@pytest.mark.parametrize(
    ("seq", "change", "says"),
    [
        (2, _renamed, "step 1 of its path is 'reject'"),
        (2, None, "cannot be read: its path cannot be rebuilt from its history rows: "),
        (3, None, "history row 3, which holds its path, is missing"),
        (0, lambda head: head.update(path=[1, 1, 0, 0]), "its delta [1, 1] does not fit"),  # its result's
        (0, lambda head: head.update(path=[1, 3, 2, 1]), "holds a path of 1 envelopes and 1 decisions, not 2 and 1"),
        (0, lambda head: head.update(path=[2, 3, 1, 1]), "missing or damaged"),
        (0, lambda head: head.update(path=[3, 1, 1, 1]), "its path names no history rows"),
        (0, lambda head: head.update(envelopes=[]), "holds a path of its own"),
        (0, lambda head: head.update(of=99), "has format 99"),
    ],
)
def test_an_edited_head_or_path_row_is_refused_before_any_step_runs(
    paused: tuple[str, list[str]], seq: int, change: Callable[[dict[str, Any]], None] | None, says: str
) -> None:
    db, ran = paused
    rows = _rows_of(db)
    doc = copy.deepcopy(rows[seq])
    if change is not None:
        change(doc)
    _write(db, seq, None if change is None else doc)
    with pytest.raises(CheckpointMismatchError, match=f"the checkpoint of {KEY!r}") as refused:
        resume(db, ran, answer="yes")
    assert says in str(refused.value)
    assert ran == []


def _edited_rows(data: st.DataObject, db: str) -> None:
    """One of the run's documents (its head, or a history row its path is rebuilt from) edited in one node."""
    rows = _rows_of(db)
    seq = data.draw(st.sampled_from(sorted(rows)))
    _write(db, seq, data.draw(mutation(rows[seq])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_run_with_an_edited_row_resumes_identically_or_is_refused(data: st.DataObject) -> None:
    _stopped_edited_resumed(lambda db: _edited_rows(data, db))


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_with_a_signing_key_every_edit_of_a_row_is_refused(data: st.DataObject) -> None:
    _signed_paused_edited_resumed(lambda db: _edited_rows(data, db))
