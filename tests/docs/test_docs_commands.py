"""The README's ``routegate`` commands run exactly as written, on the files in ``examples/``.

The commands are read from README.md's ```bash blocks and run in order, word for word, by this venv's
``routegate`` script, in a copy of the repository's ``examples/`` (so ``fit -o my-router`` and ``--plot curve.png``
write there, not into the repository), with a data directory of their own and none of the caller's
``OPENAI_*``/``ROUTEGATE_*``/``DATABASE_URL``. ``up`` and ``chat`` are long-running / interactive: the server and
CLI suites cover them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```$", re.DOTALL | re.MULTILINE)
NOT_RUN = {"up", "chat"}
SEMANTIC = {"fit", "eval"}
COMMAND_TIMEOUT_SECONDS = 300

pytestmark = [pytest.mark.e2e, pytest.mark.integration]  # starts processes; `ask` starts embedded PostgreSQL


def readme_commands() -> list[list[str]]:
    """Every ``routegate ...`` line of README.md's bash blocks, split as a shell would (comments dropped)."""
    text = README.read_text(encoding="utf-8")
    return [
        shlex.split(line, comments=True)
        for block in BASH_BLOCK.findall(text)
        for line in block.splitlines()
        if line.startswith("routegate ")
    ]


def test_the_readme_lists_the_commands_this_test_knows() -> None:
    names = [argv[1] for argv in readme_commands()]
    assert set(names) - NOT_RUN == {"ask", "route", "triage", "fit", "eval", "data"}, names
    assert names.index("fit") < names.index("eval"), "eval reads the router that fit writes"


def test_readme_commands_run_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ROUTEGATE_")) and k != "DATABASE_URL"}
    env["ROUTEGATE_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONPATH"] = str(Path(__file__).with_name("netguard"))  # its sitecustomize: loopback only
    routegate = Path(sys.executable).with_name("routegate")

    def run_in_order(commands: list[list[str]]) -> dict[str, str]:
        outputs: dict[str, str] = {}
        for argv in commands:
            done = subprocess.run(
                [str(routegate), *argv[1:]],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_SECONDS,
                check=False,
            )
            assert done.returncode == 0, f"`{shlex.join(argv)}` exited {done.returncode}:\n{done.stderr}"
            outputs.setdefault(argv[1], done.stdout)  # `data`, not the `data stop` after it
        return outputs

    commands = [argv for argv in readme_commands() if argv[1] not in NOT_RUN]
    # two lanes, each in README order: the semantic-router commands, and the support desk + triage (which share
    # the data directory's cached router)
    lanes = [[a for a in commands if a[1] in SEMANTIC], [a for a in commands if a[1] not in SEMANTIC]]
    with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
        outputs = {name: out for lane in pool.map(run_in_order, lanes) for name, out in lane.items()}

    routed = [json.loads(line) for line in outputs["route"].splitlines()]
    queries = [json.loads(line) for line in (ROOT / "examples" / "queries.jsonl").read_text().splitlines()]
    assert [r["text"] for r in routed] == [q["text"] for q in queries]
    assert [r["expected"] for r in routed] == [q["route"] for q in queries]  # the file's labels are read
    assert {r["route"] for r in routed} <= {"POSTGRES", "VECTOR", "EXTERNAL", "LLM"}

    assert json.loads(outputs["ask"])["route"] == "POSTGRES"
    triage = json.loads(outputs["triage"])
    assert (triage["stop_reason"], triage["selected_route"]) == ("success", "billing_specialist")

    assert json.loads((tmp_path / "my-router" / "manifest.json").read_text())["default_route"] == "oos"
    report = json.loads(outputs["eval"])
    assert (report["n"], report["n_in_scope"], report["n_oos"]) == (89, 64, 25)  # examples/clinc150/test.jsonl
    assert (tmp_path / "curve.png").read_bytes().startswith(b"\x89PNG")
    assert f"data dir: {tmp_path / 'data'}" in outputs["data"] and "support-pg" in outputs["data"]
