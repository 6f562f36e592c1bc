"""A one-shot command starts light, and reuses a database that is already up: the causes of a slow start are
guarded here, not the timing (bench/startup.py measures that).

* What a command imports: after ``routegate ask`` in a fresh process with no API key, the ``openai`` SDK, the
  HTTP server (FastAPI, Starlette, uvicorn), the UI (Streamlit) and, for a question the rules route, the encoder's
  runtime (onnxruntime, tokenizers) were never imported. Building the parser alone imports none of the commands'
  machinery.
* The embedded PostgreSQL: an ``ask`` on a data dir whose server another process holds (``routegate up``)
  attaches to it: the same postmaster before and after, still running, and the ask gone from pgserver's list of
  users; with nothing holding it, the ask stops the server it started.

Checked from outside: the module table printed by the subprocess, the process table (/proc), postmaster.pid and
pgserver's handle file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli._env import offline_env
from routegate.cli import COMMAND_MODULES

NEVER_FOR_ASK = ("openai", "fastapi", "starlette", "uvicorn", "streamlit", "httpx", "sklearn")
"""Not imported by ``ask`` without an API key, whatever the question."""
NOT_FOR_RULES = ("onnxruntime", "tokenizers")
"""Not imported by ``ask`` when the rules route the question and the articles are already embedded."""
NOT_FOR_PARSER = (
    *NEVER_FOR_ASK,
    *NOT_FOR_RULES,
    "numpy",
    "psycopg",
    "sqlglot",
    "pgserver",
    "routegate.apps.support.desk",
    "routegate.apps.triage",
    "routegate.server",
)
"""Not imported by building the parser (``routegate --help``, a usage error)."""

RULES_QUESTION = "What is the status of ticket 1?"

# runs the CLI, then writes the names of the imported modules to argv[1]; the CLI's arguments follow
_MODULES_AFTER = (
    "import json, sys; from routegate.cli import main; out = sys.argv.pop(1); status = main(sys.argv[1:]); "
    "open(out, 'w').write(json.dumps(sorted(sys.modules))); sys.exit(status)"
)


def run_cli(args: list[str], data_dir: Path, modules_file: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER, str(modules_file), *args],
        env=offline_env(data_dir),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    modules = set(json.loads(modules_file.read_text())) if modules_file.exists() else set()
    return done, modules


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` (packages) of which some module was imported."""
    return [name for name in names if any(m == name or m.startswith(name + ".") for m in modules)]


def test_building_the_parser_imports_no_command_machinery(tmp_path: Path) -> None:
    code = (
        "import json, sys; from routegate.cli import build_parser; build_parser(); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=offline_env(tmp_path), capture_output=True, text=True, check=True
    )
    modules = set(json.loads(done.stdout))
    assert set(COMMAND_MODULES) <= modules  # every command registered...
    assert loaded(modules, NOT_FOR_PARSER) == []  # ...without importing what it runs


def test_the_lazy_packages_still_export_every_name(tmp_path: Path) -> None:
    code = (
        "import json, sys; import routegate, routegate.apps.support as support; "
        "before = sorted(sys.modules); "
        "[getattr(support, n) for n in support.__all__]; [getattr(routegate, n) for n in routegate.__all__]; "
        "ns = {}; exec('from routegate.apps.support import *', ns); "
        "print(json.dumps({'before': before, 'star': sorted(set(ns) & set(support.__all__)), "
        "'all': support.__all__, 'dir': sorted(set(dir(support)) & set(support.__all__))}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=offline_env(tmp_path), capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert loaded(set(seen["before"]), ("psycopg", "sqlglot", "numpy", "openai")) == []  # importing is cheap
    assert seen["star"] == sorted(seen["all"]) == seen["dir"]  # and every public name is there


def test_version_is_read_when_asked(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "routegate", "--version"], env=offline_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("routegate ") and done.stdout.split()[1][0].isdigit()


# -- with the embedded PostgreSQL ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prepared_data_dir() -> Iterator[Path]:
    """A data dir after one ``ask``: database initialised, articles embedded, router fitted and cached."""
    # outside /tmp/pytest-of-<user>, which a concurrent pytest run may rotate away under PostgreSQL
    path = Path(tempfile.mkdtemp(prefix="routegate-startup-"))
    done = subprocess.run(
        [sys.executable, "-m", "routegate", "ask", "How do I reset my password?"],
        env=offline_env(path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    yield path
    for pid in postgres_of(path):  # never leave a server behind, whatever a test found
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def postgres_of(data_dir: Path) -> list[int]:
    """PIDs of the processes whose command line names ``data_dir`` (the embedded server's processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and str(data_dir) in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def postmaster(data_dir: Path) -> tuple[int, str] | None:
    """The running postmaster of the data dir: its PID and its start time (from /proc), or None."""
    pid_file = data_dir / "support-pg" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, ValueError, IndexError):
        return None
    return pid, started


def handle_pids(data_dir: Path) -> list[int]:
    """pgserver's list of the processes using the server."""
    pids: list[int] = json.loads((data_dir / "support-pg" / ".handle_pids.json").read_text())
    return pids


needs_proc = pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")


@pytest.mark.integration
@needs_proc
def test_ask_imports_neither_the_llm_sdk_nor_the_server_nor_the_encoder(
    prepared_data_dir: Path, tmp_path: Path
) -> None:
    done, modules = run_cli(["ask", RULES_QUESTION], prepared_data_dir, tmp_path / "modules.json")
    assert done.returncode == 0, done.stderr
    assert "Ticket 1" in done.stdout
    assert "routegate.apps.support.desk" in modules  # the desk really ran in this process
    assert loaded(modules, NEVER_FOR_ASK) == []
    assert loaded(modules, NOT_FOR_RULES) == []


@pytest.mark.integration
@needs_proc
def test_ask_on_a_semantic_question_still_needs_no_llm_sdk_or_server(prepared_data_dir: Path, tmp_path: Path) -> None:
    done, modules = run_cli(["ask", "How do I reset my password?"], prepared_data_dir, tmp_path / "modules.json")
    assert done.returncode == 0, done.stderr
    assert "Password Reset Guide" in done.stdout
    assert "onnxruntime" in modules  # the encoder ran: the lazy parts do load when needed
    assert loaded(modules, NEVER_FOR_ASK) == []


@pytest.mark.integration
@needs_proc
def test_ask_desk_again_embeds_no_example_and_loads_no_encoder(prepared_data_dir: Path, tmp_path: Path) -> None:
    """A desk routing by its nearest examples embeds them at its first start only: the next ``ask --desk`` reads
    their vectors from the data dir, and for a question the rules route loads no encoder at all."""
    from routegate.apps.configured.config import builtin_desk_dir

    desk = Path(shutil.copytree(builtin_desk_dir(), tmp_path / "desk"))
    toml = desk / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert "fit_at_start = true\n" in text
    toml.write_text(text.replace("fit_at_start = true\n", "fit_at_start = false\n"), encoding="utf-8")
    first, modules = run_cli(["ask", "--desk", str(desk), RULES_QUESTION], prepared_data_dir, tmp_path / "first.json")
    assert first.returncode == 0, first.stderr
    assert "onnxruntime" in modules  # the first start embedded the examples
    assert len(list(prepared_data_dir.glob("desk-examples-*.npy"))) == 1

    again, modules = run_cli(["ask", "--desk", str(desk), RULES_QUESTION], prepared_data_dir, tmp_path / "again.json")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout and "Ticket 1" in again.stdout
    assert "routegate.apps.support.desk" in modules  # the desk really ran in this process
    assert loaded(modules, NOT_FOR_RULES) == []


@pytest.mark.integration
@needs_proc
def test_ask_with_nothing_running_stops_the_server_it_started(prepared_data_dir: Path, tmp_path: Path) -> None:
    assert postmaster(prepared_data_dir) is None and postgres_of(prepared_data_dir) == []
    done, _ = run_cli(["ask", RULES_QUESTION], prepared_data_dir, tmp_path / "modules.json")
    assert done.returncode == 0, done.stderr
    assert postmaster(prepared_data_dir) is None
    assert postgres_of(prepared_data_dir) == []


@pytest.mark.integration
@needs_proc
def test_ask_attaches_to_a_running_server_and_leaves_it_running(prepared_data_dir: Path, tmp_path: Path) -> None:
    holder = subprocess.Popen(  # what `routegate up` does with the database: hold it open
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from routegate.apps.support.db import EmbeddedPostgres; "
            "server = EmbeddedPostgres(Path(sys.argv[1])); server.start(); print('ready', flush=True); "
            "sys.stdin.read(); server.stop()",
            str(prepared_data_dir / "support-pg"),
        ],
        env=offline_env(prepared_data_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = postmaster(prepared_data_dir)
        assert before is not None
        assert handle_pids(prepared_data_dir) == [holder.pid]

        for question in (RULES_QUESTION, "How do I reset my password?"):
            done, _ = run_cli(["ask", question], prepared_data_dir, tmp_path / "modules.json")
            assert done.returncode == 0, done.stderr
            # the same server process (same PID, same start time): not stopped, not started again
            assert postmaster(prepared_data_dir) == before
            assert handle_pids(prepared_data_dir) == [holder.pid]  # the ask left pgserver's list of users
    finally:
        holder.communicate(timeout=60)  # closes its stdin: it stops the server and exits
    assert postmaster(prepared_data_dir) is None  # the holder was the last user: the server stopped


@pytest.mark.integration
@needs_proc
def test_sigterm_while_the_desk_is_still_loading_leaves_no_server(prepared_data_dir: Path) -> None:
    """The server starts on a thread while the desk's modules are imported: a SIGTERM in that window (as soon as
    the server's process exists) still stops it before the command exits."""
    assert postgres_of(prepared_data_dir) == []
    proc = subprocess.Popen(
        [sys.executable, "-m", "routegate", "ask", RULES_QUESTION],
        env=offline_env(prepared_data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not postgres_of(prepared_data_dir) and proc.poll() is None:  # the server is starting, bounded
            assert time.monotonic() < deadline, "the embedded PostgreSQL did not start"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode in (143, 0), err  # 0: the answer was quicker than the signal
    assert "Traceback" not in err
    if proc.returncode == 143:
        assert err.strip().splitlines() == ["terminated"], err
    deadline = time.monotonic() + 30
    while postgres_of(prepared_data_dir) and time.monotonic() < deadline:  # bounded
        time.sleep(0.1)
    assert postgres_of(prepared_data_dir) == []
    assert postmaster(prepared_data_dir) is None
