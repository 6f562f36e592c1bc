"""Write tests/plan/data/stores_whole_heads.json: durable runs as the store held them before the latest checkpoint
became a head rebuilt from the history (every latest checkpoint whole in ``plan_runs``, format 2/3).

Run it with that release's routegate on the path (the fixture in the repository was written by the tree of
2026-12-02, commit 3248116): ``PYTHONPATH=<old tree>/src python tests/plan/make_compat_stores.py OUT.json``. It
imports ``compat_plans`` from this folder under that name (a checkpoint's fingerprint hashes the targets' module
names). tests/plan/test_plan_durable_compat.py loads the rows into fresh stores and resumes them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

SECRET = "0123456789abcdef-compat-signing-key"


def _crash(db: str, key: str, history: str) -> None:
    """A ticking run killed inside its step (n == 3): stored as running, as a crash leaves it."""
    code = (
        "import sys, compat_plans as cp\n"
        "from routegate.plan import Store\n"
        f"store = Store(db={db!r}, history={history})\n"
        f"cp.ticking_plan(store).run(0, checkpoint_key={key!r})\n"
    )
    env = {**os.environ, "COMPAT_CRASH_AT": "3", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr


def main(out: str) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import compat_plans as cp

    from routegate.plan import Store

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "plans.sqlite")
        plain, signed = Store(db=db), Store(db=db, signing_key=SECRET)
        latest, bounded = Store(db=db, history=False), Store(db=db, history=3)
        assert cp.refund_plan(plain).run(250, checkpoint_key="paused").stop_reason == "interrupted"
        assert cp.refund_plan(signed).run(250, checkpoint_key="paused-signed").stop_reason == "interrupted"
        assert cp.refund_plan(latest).run(250, checkpoint_key="paused-latest").stop_reason == "interrupted"
        assert cp.loop_plan(plain).run(1, checkpoint_key="done").ok
        assert cp.loop_plan(signed).run(1, checkpoint_key="done-signed").ok
        forked = cp.refund_plan(plain).fork("paused", at=2, checkpoint_key="paused-fork")
        assert forked.stop_reason == "interrupted"
        for store in (plain, signed, latest, bounded):
            store.close()
        _crash(db, "crashed", "True")
        _crash(db, "crashed-bounded", "3")
        _crash(db, "crashed-latest", "False")
        with sqlite3.connect(db) as conn:
            runs = conn.execute(
                "SELECT key, status, stop_reason, updated, state FROM plan_runs ORDER BY key"
            ).fetchall()
            rows = conn.execute(
                "SELECT key, seq, status, stop_reason, updated, state FROM plan_history ORDER BY key, seq"
            ).fetchall()
    doc = {"secret": SECRET, "plan_runs": [list(r) for r in runs], "plan_history": [list(r) for r in rows]}
    Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
