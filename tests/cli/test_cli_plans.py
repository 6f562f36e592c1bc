"""``routegate plans list|show|resume`` over a SQLite checkpoint store, driven like an operator would."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from routegate.cli import main

PLAN_MODULE = """
from routegate.plan import Plan, Step, interrupt

def ask(amount):
    return f"refund {amount}: {interrupt(f'approve refund of {amount}?')}"

def plan():
    return Plan(Step(lambda x: int(x) * 2, name="double"), Step(ask))
"""


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """An interrupted run under key "job-1" in a SQLite store, and the module:attribute of its plan."""
    name = f"plans_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PLAN_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    from routegate.plan import Store

    db = str(tmp_path / "plans.sqlite")
    store = Store(db=db)
    result = importlib.import_module(name).plan().run(21, store=store, checkpoint_key="job-1")
    store.close()
    assert result.stop_reason == "interrupted"
    return db, f"{name}:plan"


def _lists_the_paused_job(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``plans list --json`` shows the job paused at ``ask``, with its question."""
    assert main(["plans", "list", "--db", db, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["key"], row["status"], row["next"], row["question"]) == (
        "job-1",
        "interrupted",
        "ask",
        "approve refund of 42?",
    )


def test_list_show_and_resume_an_interrupted_run(job: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    db, spec = job
    _lists_the_paused_job(db, capsys)

    assert main(["plans", "show", "job-1", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["path"] == ["double", "ask"] and shown["status"] == "interrupted"

    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--answer", "yes"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["stop_reason"], done["payload"], done["path"]) == ("success", "refund 42: yes", ["double", "ask"])

    assert main(["plans", "list", "--db", db]) == 0
    table = capsys.readouterr().out
    assert "job-1" in table and "ended" in table and "success" in table


def test_errors_say_what_to_do(job: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db, spec = job
    assert main(["plans", "show", "nope", "--db", db]) == 2
    assert "no run under key 'nope'" in capsys.readouterr().err
    assert main(["plans", "list", "--db", str(tmp_path / "missing.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", "no_module_here:plan"]) == 2
    assert "--plan" in capsys.readouterr().err
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--answer-json", "{bad"]) == 2
    assert "--answer-json is not JSON" in capsys.readouterr().err


EVIL_KEY = "evil\x1b[2J"
EVIL_QUESTION = "approve?\x1b]0;owned\x07 \x9b31m \u202egnp.exe"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def _evil_run(db: str) -> None:
    """A run whose key and interrupt question carry terminal escape sequences (a store another party writes to)."""
    from routegate.plan import Plan, Step, Store, interrupt

    store = Store(db=db)
    try:
        paused = Plan(Step(lambda x: interrupt(EVIL_QUESTION), name="ask\x1b[1m")).run(
            1, store=store, checkpoint_key=EVIL_KEY
        )
    finally:
        store.close()
    assert paused.stop_reason == "interrupted"


def test_list_and_show_print_terminal_escapes_from_the_store_escaped(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = job
    _evil_run(db)
    assert main(["plans", "list", "--db", db]) == 0
    table = capsys.readouterr().out
    assert not any(c in table for c in RAW)
    assert "evil\\x1b[2J" in table and "ask\\x1b[1m" in table and "job-1" in table

    assert main(["plans", "list", "--db", db, "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not any(c in line for line in lines for c in RAW)
    rows = {row["key"]: row for row in map(json.loads, lines)}
    assert rows[EVIL_KEY]["question"] == EVIL_QUESTION  # escaped on the screen, intact for a JSON reader

    assert main(["plans", "show", EVIL_KEY, "--db", db]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW)
    assert json.loads(out)["path"] == ["ask\x1b[1m"]


def test_a_malformed_row_is_skipped_and_named_and_the_others_still_work(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db, spec = job
    with sqlite3.connect(db) as conn:
        rows = [
            ("broken", "running", "", 0.0, '{"format": 2, "at": '),
            ("a-list", "running", "", 0.0, "[1, 2]"),
            ("bad-time", "ended", "success", "yesterday", '{"format": 2}'),
            ("bad-result", "ended", "error", 0.0, '{"format": 2, "result": "nope", "next": 3}'),
        ]
        conn.executemany("INSERT INTO plan_runs VALUES (?, ?, ?, ?, ?)", rows)
    assert main(["plans", "list", "--db", db]) == 0
    captured = capsys.readouterr()
    assert "job-1" in captured.out and "interrupted" in captured.out
    assert "skipped run 'broken': its document is not JSON" in captured.err
    assert "skipped run 'a-list': its document is a JSON list, not an object" in captured.err
    assert "skipped run 'bad-time': its time of writing is 'yesterday', not a number" in captured.err
    assert "bad-result" in captured.out  # readable, though not resumable

    assert main(["plans", "list", "--db", db, "--json"]) == 0
    assert [json.loads(line)["key"] for line in capsys.readouterr().out.splitlines()] == ["bad-result", "job-1"]

    assert main(["plans", "show", "job-1", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"
    assert main(["plans", "show", "broken", "--db", db]) == 1
    assert "skipped run 'broken'" in capsys.readouterr().err

    assert main(["plans", "resume", "broken", "--db", db, "--plan", spec]) == 2
    assert "the checkpoint of 'broken' cannot be read" in capsys.readouterr().err


def test_with_a_signing_key_resume_refuses_an_unsigned_run_and_show_says_so(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, spec = job
    monkeypatch.setenv("ROUTEGATE_CHECKPOINT_SIGNING_KEY", "a-key-of-at-least-16-bytes")
    assert main(["plans", "show", "job-1", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["signature"] == "missing"
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--answer", "yes"]) == 2
    assert "(format 2) is not signed" in capsys.readouterr().err

    monkeypatch.delenv("ROUTEGATE_CHECKPOINT_SIGNING_KEY")
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--answer", "yes"]) == 0
    assert json.loads(capsys.readouterr().out)["payload"] == "refund 42: yes"


SIGNED_PLAN_MODULE = """
from routegate.plan import Plan, Step, Store, interrupt

def ask(amount):
    return f"refund {amount}: {interrupt('approve?')}"

def plan():
    return Plan(Step(ask), store=Store(signing_key="the-plan-module-signing-key"))
"""


def test_resume_keeps_the_signing_of_the_plans_own_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib
    import sqlite3

    from routegate.plan import Store

    name = f"signed_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(SIGNED_PLAN_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = str(tmp_path / "plans.sqlite")
    store = Store(db=db, signing_key="the-plan-module-signing-key")
    assert importlib.import_module(name).plan().run(5, store=store, checkpoint_key="s-1").stop_reason == "interrupted"
    store.close()
    with sqlite3.connect(db) as conn:  # a writer without the key answers for the approver
        (text,) = conn.execute("SELECT state FROM plan_runs WHERE key = 's-1'").fetchone()
        state = json.loads(text)
        state["answers"] = {state["asked"]: ["yes"]}
        conn.execute("UPDATE plan_runs SET state = ? WHERE key = 's-1'", (json.dumps(state),))
    assert main(["plans", "resume", "s-1", "--db", db, "--plan", f"{name}:plan"]) == 2
    assert "does not match its content" in capsys.readouterr().err
    monkeypatch.setenv("ROUTEGATE_CHECKPOINT_SIGNING_KEY", "the-plan-module-signing-key")
    assert main(["plans", "show", "s-1", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["signature"] == "invalid"
    with sqlite3.connect(db) as conn:  # the genuine document back
        conn.execute("UPDATE plan_runs SET state = ? WHERE key = 's-1'", (text,))
    assert main(["plans", "show", "s-1", "--db", db]) == 0
    assert json.loads(capsys.readouterr().out)["signature"] == "valid"
    assert main(["plans", "resume", "s-1", "--db", db, "--plan", f"{name}:plan", "--answer", "no"]) == 0
    assert json.loads(capsys.readouterr().out)["payload"] == "refund 5: no"


def test_list_reads_each_runs_latest_row_only_and_show_checks_its_path(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A listing reads no history: a run whose history rows are gone is still listed from its latest row (status,
    next step, question), and ``show``, which rebuilds the checkpoint, names what is missing."""
    import sqlite3

    db, _ = job
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM plan_history WHERE key = 'job-1'")
    _lists_the_paused_job(db, capsys)

    assert main(["plans", "show", "job-1", "--db", db]) == 1
    assert "its path cannot be rebuilt from its history rows" in capsys.readouterr().err
