"""``routegate plans history``, ``plans show --at N / --diagram`` and ``plans resume --at N / --from STEP
[--payload FILE]`` over a SQLite checkpoint store, driven as an operator would."""

from __future__ import annotations

import importlib
import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from routegate.cli import main

PLAN_MODULE = """
from pydantic import BaseModel
from routegate.plan import Plan, Step, when

class Count(BaseModel):
    n: int

def start(x: int) -> Count:
    return Count(n=x)

def inc(count: Count) -> Count:
    return Count(n=count.n + 1)

def done(count: Count) -> str:
    return f"done at {count.n}"

def plan():
    return Plan(Step(start, output=Count), Step(inc, output=Count, routes={"inc": when.field("n").less_than(3)}),
                Step(done))
"""


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A finished run under key "job-1" (start, inc ×3, done) in a SQLite store, and its plan's module:attribute."""
    name = f"plans_history_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PLAN_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from routegate.plan import Store

    db = str(tmp_path / "plans.sqlite")
    store = Store(db=db)
    assert importlib.import_module(name).plan().run(0, store=store, checkpoint_key="job-1").ok
    store.close()
    return db, f"{name}:plan"


def test_history_lists_every_checkpoint_as_a_table_and_as_json(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = job
    assert main(["plans", "history", "job-1", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "run job-1: 6 checkpoints"
    assert lines[1].split()[:4] == ["AT", "STEP", "WRITTEN", "ROUTE"]
    assert lines[4].split()[:2] == ["3", "inc"] and "when.field('n').less_than(3)" in lines[4]
    assert lines[-1].split()[:2] == ["6", "-"] and "success" in lines[-1]
    assert main(["plans", "history", "job-1", "--db", db, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["at"], r["step"], r["payload"]) for r in rows][:3] == [
        (1, "start", 0),
        (2, "inc", {"n": 0}),
        (3, "inc", {"n": 1}),
    ]
    assert rows[1]["output_hash"] == rows[2]["input_hash"] and rows[1]["size"] == 7


def test_show_at_a_checkpoint_and_the_plan_drawn_with_the_runs_path(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    db, spec = job
    assert main(["plans", "show", "job-1", "--db", db, "--at", "3"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["at"], shown["status"], shown["next"], shown["path"]) == (3, "running", "inc", ["start", "inc"])
    assert main(["plans", "show", "job-1", "--db", db, "--diagram", "--plan", spec]) == 0
    text = capsys.readouterr().out
    assert text.startswith("flowchart TD\n") and 's1 ==>|"when.field' in text and "s2 ==> finish" in text
    assert main(["plans", "show", "job-1", "--db", db, "--at", "3", "--diagram", "dot", "--plan", spec]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith("digraph plan {") and 's1 [label="inc", style="rounded,filled", fillcolor="#ffc9c9"' in dot


def test_resume_at_a_checkpoint_starts_a_new_run_with_an_edited_payload(
    job: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, spec = job
    payload = tmp_path / "payload.json"
    payload.write_text('{"n": 2}', encoding="utf-8")
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--at", "3", "--payload", str(payload)]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["parent"] == {"key": "job-1", "at": 3, "edited": True}
    assert (done["stop_reason"], done["payload"], done["path"]) == (
        "success",
        "done at 3",
        ["start", "inc", "inc", "done"],
    )
    assert done["key"].startswith("job-1/at-3-")
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--from", "done", "--key", "job-1-again"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["key"], again["parent"]["at"], again["payload"]) == ("job-1-again", 5, "done at 3")
    assert main(["plans", "history", "job-1-again", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "run job-1-again (forked from job-1 at checkpoint 5): 2 checkpoints"
    assert "forked from job-1 at 5" in lines[2]
    assert main(["plans", "show", "job-1", "--db", db]) == 0  # the parent is as it was
    assert json.loads(capsys.readouterr().out)["status"] == "ended"


def test_errors_say_what_to_do(job: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db, spec = job
    assert main(["plans", "show", "job-1", "--db", db, "--diagram"]) == 2
    assert "--diagram draws the run's plan: give it with --plan" in capsys.readouterr().err
    assert main(["plans", "show", "job-1", "--db", db, "--at", "42"]) == 2
    assert "has no checkpoint 42 (its history holds 1 to 6)" in capsys.readouterr().err
    assert main(["plans", "history", "nope", "--db", db]) == 2
    assert "no run under key 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{n: 2", encoding="utf-8")
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--at", "3", "--payload", str(bad)]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--payload", str(bad)]) == 2
    assert "give --at N or --from STEP" in capsys.readouterr().err
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"n": "many"}', encoding="utf-8")
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--at", "3", "--payload", str(wrong)]) == 2
    assert "does not validate as the output type of 'inc'" in capsys.readouterr().err
    assert main(["plans", "resume", "job-1", "--db", db, "--plan", spec, "--at", "6"]) == 2
    assert "is the end of a successful run" in capsys.readouterr().err


EVIL = "route\x1b[2J\x9b31m\u202e"


def test_what_the_history_holds_is_printed_escaped(job: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    db, _ = job
    with sqlite3.connect(db) as conn:
        (state,) = conn.execute("SELECT state FROM plan_history WHERE key = 'job-1' AND seq = 2").fetchone()
        doc = json.loads(state)
        doc["decisions"] = [[None, EVIL]]
        doc["prev"] = {"v": EVIL}
        doc["next"] = EVIL
        conn.execute("UPDATE plan_history SET state = ? WHERE key = 'job-1' AND seq = 2", (json.dumps(doc),))
        conn.execute("UPDATE plan_history SET state = '[' WHERE key = 'job-1' AND seq = 4")
    assert main(["plans", "history", "job-1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
    assert "route\\x1b[2J\\x9b31m\\u202e" in out
    assert "    4 damaged: its document is not JSON" in out
    assert main(["plans", "history", "job-1", "--db", db, "--json"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
