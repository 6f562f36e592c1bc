"""``routegate plans list|show`` survive any stored value, on both backends.

A checkpoint holds what a run's steps returned: a huge integer, NaN, deep nesting, megabytes of text, terminal
escapes; and a store may hold rows another writer put there (a number of 5,000 digits, which Python will not even
read by default). Written through the public API (a plan run) and by such a writer, then read as an operator
does, through the command line: every run is listed, the odd one is shown with its values summarised, and the
output is strict JSON.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Any

import pytest

from routegate.cli import main
from routegate.plan import Plan, Step, Store

HUGE_DIGITS = "9" * 5_000


def _odd(_: object) -> dict[str, Any]:
    deep: Any = "bottom"
    for _level in range(150):
        deep = {"d": deep}
    return {
        "big": 10**3_900,  # within what a checkpoint writes as a number
        "bigger": 10**5_000,  # written as a marker
        "nan": float("nan"),
        "inf": float("-inf"),
        "deep": deep,
        "long": "x" * 5_000_000,
        "many": list(range(50_000)),
        "escape": "\x1b[2J\x9b31m",
    }


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _plant(db: str, key: str) -> None:
    """A row another writer put in the store: a document holding a 5,000-digit number."""
    doc = '{"format": 2, "next": "approve", "input": ' + HUGE_DIGITS + "}"
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO routegate_plan_runs VALUES (%s, 'running', '', extract(epoch FROM now()), %s::jsonb)",
                (key, doc),
            )
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO plan_runs VALUES (?, 'running', '', 0.0, ?)", (key, doc))


@pytest.mark.timeout(300)
def test_list_and_show_survive_any_stored_value(plan_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    tag = uuid.uuid4().hex[:8]
    odd, plain, planted = f"odd-{tag}", f"plain-{tag}", f"planted-{tag}"
    store = Store(db=plan_db)
    try:
        assert Plan(Step(_odd, name="odd")).run(1, store=store, checkpoint_key=odd).ok
        assert Plan(Step(lambda x: x + 1, name="inc")).run(1, store=store, checkpoint_key=plain).ok
    finally:
        store.close()
    _plant(plan_db, planted)

    assert main(["plans", "list", "--db", plan_db]) == 0
    table = capsys.readouterr()
    for key in (odd, plain, planted):
        assert key in table.out, table
    assert "\x1b" not in table.out and "\x9b" not in table.out

    assert main(["plans", "list", "--db", plan_db, "--json"]) == 0
    rows = {row["key"]: row for row in map(_strict, capsys.readouterr().out.splitlines())}
    assert {odd, plain, planted} <= set(rows)
    assert rows[planted]["status"] == "running" and rows[planted]["next"] == "approve"

    assert main(["plans", "show", odd, "--db", plan_db]) == 0
    out = capsys.readouterr().out
    assert len(out) < 100_000  # summarised, not five megabytes
    shown = _strict(out)
    payload = shown["payload"]
    assert payload["big"] == 10**3_900 or str(payload["big"]).startswith("<integer")
    assert payload["long"].startswith("xxxx") and "5000000 characters" in payload["long"]
    assert len(payload["many"]) < 1_000 and "50000 items" in str(payload["many"][-1])
    assert payload["nan"] == "nan" and payload["inf"] == "-inf"
    assert shown["path"] == ["odd"]

    assert main(["plans", "show", planted, "--db", plan_db]) == 0
    shown = _strict(capsys.readouterr().out)
    assert shown["status"] == "running" and shown["next"] == "approve"
