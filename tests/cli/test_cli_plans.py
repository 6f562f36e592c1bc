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


def test_list_show_and_resume_an_interrupted_run(job: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    db, spec = job
    assert main(["plans", "list", "--db", db, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["key"], row["status"], row["next"], row["question"]) == (
        "job-1",
        "interrupted",
        "ask",
        "approve refund of 42?",
    )

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
