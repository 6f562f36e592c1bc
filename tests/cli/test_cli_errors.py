"""No traceback reaches a user: every expected failure of the CLI is one line ``error: <what>; <what to do>`` and
a non-zero exit; ``--debug`` / ``ROUTEGATE_DEBUG=1`` add the traceback. Checked from outside, as a user runs it:
a real process with raw bytes in argv, its exit status, its stdout and stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import routegate.cli.triage as triage_cli
from cli._env import RUN_CLI, go_offline, offline_env
from routegate.cli import main
from routegate.errors import RuntimeFaultError
from routegate.testing import ScriptedOpenAIServer


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return offline_env(tmp_path / "data")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go_offline(monkeypatch, tmp_path / "data")


def _run(args: list[str | bytes], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, *args],
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        check=False,
    )


def _one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("command", ["ask", "route", "triage"])
def test_invalid_utf8_in_argv_is_refused_with_its_position(command: str, env: dict[str, str], tmp_path: Path) -> None:
    done = _run([command, b"caf\xe9 \xff"], env)
    assert done.returncode == 2
    line = _one_error_line(done.stderr)
    assert "not valid UTF-8 (0xE9) at position 3" in line
    assert done.stdout == ""  # no "Sorry..." answer
    assert not (tmp_path / "data" / "support-pg").exists()  # refused before any database started


def test_a_bad_base_url_fails_at_start_up_naming_the_variable(env: dict[str, str]) -> None:
    # the database URL points nowhere: the error must be about the LLM setting, found first, not the database
    bad = {**env, "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "not a url", "DATABASE_URL": "postgresql://127.0.0.1:1/x"}
    for command in (["ask", "hello"], ["triage", "refund please"]):
        done = _run(command, bad)
        assert done.returncode == 2
        line = _one_error_line(done.stderr)
        assert "OPENAI_BASE_URL" in line and "'not a url'" in line
        assert "database" not in line.lower()


def test_invalid_settings_name_the_variable(env: dict[str, str]) -> None:
    done = _run(["route", "hello"], {**env, "ROUTEGATE_SERVER_PORT": "abc"})
    assert done.returncode == 2
    assert "ROUTEGATE_SERVER_PORT" in _one_error_line(done.stderr)


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://nowhere")
    assert main(["triage", "refund"]) == 2
    _one_error_line(capsys.readouterr().err)
    for argv in (["--debug", "triage", "refund"], ["triage", "refund", "--debug"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback (most recent call last)" in err
        assert err.strip().splitlines()[-1].startswith("error: OPENAI_BASE_URL")
    monkeypatch.setenv("ROUTEGATE_DEBUG", "1")
    assert main(["triage", "refund"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_an_unexpected_exception_is_one_line_asking_for_a_report(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(triage_cli, "_triage", boom)
    assert main(["triage", "refund"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "unexpected RuntimeError: boom second line" in line
    assert "--debug" in line


def test_a_database_failure_is_one_line_naming_database_url(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import routegate.cli.support as support_cli

    def unreachable(settings: object) -> None:
        try:
            raise psycopg.OperationalError('connection to server at "127.0.0.1", port 1 failed\nIs it running?')
        except psycopg.OperationalError as exc:
            raise RuntimeFaultError(f"could not connect to PostgreSQL: {exc}") from exc

    monkeypatch.setattr(support_cli, "open_support_desk", unreachable)
    assert main(["ask", "hello"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "could not connect to PostgreSQL" in line and "DATABASE_URL" in line


def test_an_unreachable_llm_is_llm_error_connect_not_a_timeout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedOpenAIServer() as gone:
        base_url = gone.base_url  # closed once the server stopped
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("ROUTEGATE_OPENAI_MAX_RETRIES", "0")
    code = main(["triage", "--compact", "refund please"])
    result = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (result["stop_reason"], result["phase"]) == ("llm_error:connect", "route")


def test_serve_with_an_unreachable_database_is_one_line(env: dict[str, str]) -> None:
    # port 1 on loopback refuses connections: the first, direct connection attempt says so at once
    done = _run(["serve", "--port", "0"], {**env, "DATABASE_URL": "postgresql://127.0.0.1:1/none"})
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert "could not connect to PostgreSQL" in errors[0] and "DATABASE_URL" in errors[0]
    assert len(done.stderr.strip().splitlines()) <= 2  # at most the "starting" line before it


def test_a_closed_pipe_ends_quietly(env: dict[str, str], tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"text": f"what is the status of ticket {i}"}) + "\n" for i in range(3000)))
    with subprocess.Popen(
        [sys.executable, "-c", RUN_CLI, "route", "--file", str(queries)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()  # the reader takes one line (``| head -1``) and goes away
        proc.stdout.close()
        stderr = proc.stderr.read().decode("utf-8", "replace")
        code = proc.wait(timeout=120)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert code == 141


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://someone:pw@127.0.0.1:1/none", "Connection refused"),  # the cause, not "pool incomplete"
        ("host=127.0.0.1 password=hunter2 not-a-url", "not a PostgreSQL URL or connection string"),
    ],
    ids=["refused", "malformed"],
)
def test_a_dead_or_malformed_database_url_names_the_cause(env: dict[str, str], url: str, expected: str) -> None:
    done = _run(["ask", "what is the status of ticket 1?"], {**env, "DATABASE_URL": url})
    line = _one_error_line(done.stderr)
    assert expected in line and "DATABASE_URL" in line
    assert "pool" not in line.lower()  # not the pool's "initialization incomplete" after retrying for 10 s
    assert "hunter2" not in line  # a malformed URL is not echoed: it may hold a password
