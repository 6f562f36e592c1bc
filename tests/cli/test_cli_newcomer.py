"""The rough edges a newcomer hits first, each checked as the newcomer meets it: a real ``routegate`` process (or
``main()`` with captured output), its exit status, its output and what it left on disk."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import routegate.embed.minilm
from cli._env import RUN_CLI, go_offline, offline_env
from routegate.cli import build_parser, main
from routegate.errors import ConfigurationError
from routegate.routers.data import parse_examples

ROOT = Path(__file__).resolve().parents[2]
CLINC_TRAIN = ROOT / "examples" / "clinc150" / "train.jsonl"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return offline_env(tmp_path / "data")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go_offline(monkeypatch, tmp_path / "data")


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


# -- ask / chat --session -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["ask", "hello", "--session", "bad id"], ["chat", "--session", "bad id"]])
def test_a_bad_session_id_is_an_input_error(argv: list[str], env: dict[str, str], tmp_path: Path) -> None:
    done = run(argv, env)
    assert done.returncode == 2  # as every other input error
    line = one_error_line(done.stderr)
    assert "--session 'bad id' is not a session id" in line and "letters, digits" in line
    assert not (tmp_path / "data" / "support-pg").exists()  # refused before the database started


# -- route --file - -------------------------------------------------------------------------------------------------
def test_route_file_dash_reads_standard_input(env: dict[str, str]) -> None:
    queries = "".join(json.dumps({"text": t}) + "\n" for t in ("What is the status of ticket 1?", "weather in Oslo"))
    done = run(["route", "--file", "-"], env, stdin=queries)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["text"] for line in lines] == ["What is the status of ticket 1?", "weather in Oslo"]
    assert lines[0]["route"] == "POSTGRES"


# -- malformed JSONL --------------------------------------------------------------------------------------------------
BAD_LINE = '{"text": "tab\there", "label": "x"}'  # a raw control character inside a string


@pytest.mark.parametrize("command", ["route", "fit"])
def test_a_malformed_jsonl_line_is_named_in_full(command: str, env: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text('{"text": "fine", "label": "x"}\n' + BAD_LINE + "\n", encoding="utf-8")
    argv = (
        ["route", "--file", str(data)]
        if command == "route"
        else ["fit", "--train", str(data), "-o", str(tmp_path / "r")]
    )
    done = run(argv, env)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"{data}, line 2, column 14: not valid JSON: a raw control character (U+0009)" in line
    assert not line.rstrip(")").endswith(" at")


@given(st.text(max_size=30))
def test_every_malformed_line_is_named_with_its_line_and_column(line: str) -> None:
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        column = exc.colno
    else:
        return
    if not line.strip():
        return  # a blank line is skipped, not refused
    with pytest.raises(ConfigurationError) as refused:
        parse_examples(["", line], source="data.jsonl")
    message = str(refused.value)
    assert message.startswith(f"data.jsonl, line 2, column {column}: not valid JSON: ")
    assert " at;" not in message and not message.endswith(" at")


# -- plans ------------------------------------------------------------------------------------------------------------
def test_plans_on_a_file_that_is_no_store_is_a_user_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    not_a_store = tmp_path / "passwd"
    not_a_store.write_text("root:x:0:0:root:/root:/bin/bash\n" * 20)
    before = not_a_store.read_bytes()
    assert main(["plans", "list", "--db", str(not_a_store)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{not_a_store} is not a routegate plan store" in line
    assert "bug" not in line and "--debug" not in line
    assert not_a_store.read_bytes() == before


def test_debug_works_after_every_command_and_action(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    not_a_store = tmp_path / "passwd"
    not_a_store.write_text("root:x:0:0\n")
    assert main(["plans", "list", "--db", str(not_a_store), "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "is not a routegate plan store" in err

    def leaves(parser: object, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
        actions = [a for a in parser._actions if a.choices and hasattr(a, "_name_parser_map")]  # type: ignore[attr-defined]
        if not actions:
            yield path, parser
        for action in actions:
            for name, child in action.choices.items():
                yield from leaves(child, (*path, name))

    found = list(leaves(build_parser(), ()))
    assert ("plans", "resume") in [path for path, _ in found] and len(found) >= 12
    for path, parser in found:
        assert "--debug" in parser._option_string_actions, path  # type: ignore[attr-defined]


def test_plans_on_a_dead_postgres_names_the_server_not_database_url(env: dict[str, str]) -> None:
    done = run(["plans", "list", "--db", "postgresql://someone:hunter2@127.0.0.1:1/plans"], env)
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert "cannot connect to the PostgreSQL server of --db (127.0.0.1:1)" in line
    assert "Connection refused" in line and "--db" in line
    assert "DATABASE_URL" not in line and "pgvector" not in line and "hunter2" not in line and "someone" not in line


# -- fit leaves a whole router or nothing ------------------------------------------------------------------------------
def test_a_refused_fit_leaves_nothing(env: dict[str, str], tmp_path: Path) -> None:
    one_label = tmp_path / "one.jsonl"
    one_label.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "x"}\n', encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", RUN_CLI, "fit", "--train", str(one_label), "-o", "out/deep/router", "--no-progress"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 2 and "at least 2 labels" in done.stderr
    assert list(work.iterdir()) == []


class _InterruptedEncoder:
    """Ctrl-C in the long part of a fit (while encoding)."""

    model_id = "interrupted"
    dim = 384

    def __init__(self, **kwargs: object) -> None:
        pass

    def encode(self, texts: object) -> object:
        raise KeyboardInterrupt


def test_an_interrupted_fit_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(routegate.embed.minilm, "MiniLMEncoder", _InterruptedEncoder)  # what `fit` builds
    monkeypatch.chdir(tmp_path)
    assert main(["fit", "--train", str(CLINC_TRAIN), "-o", "router", "--no-progress"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_fit_into_an_existing_directory_keeps_its_other_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "router"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["fit", "--train", str(CLINC_TRAIN), "-o", str(out), "--no-progress", "--json"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["router"]  # nothing left beside it
    assert json.loads(capsys.readouterr().out)["router"] == str(out)


# -- serve / up on a busy port -----------------------------------------------------------------------------------------
@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["serve", "--port", "{port}"], "--port"),
        (["serve", "--port", "{port}", "--workers", "2"], "--port"),
        (["up", "--port", "0", "--ui-port", "{port}"], "--ui-port"),
    ],
    ids=["serve", "serve-workers", "up-ui"],
)
def test_a_busy_port_is_one_line_and_exit_2(
    argv: list[str], flag: str, busy_port: int, env: dict[str, str], tmp_path: Path
) -> None:
    done = run([a.format(port=busy_port) for a in argv], env)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (
        f"error: port {busy_port} on 127.0.0.1 is already in use: stop the other server or pass {flag} N"
    )
    assert "Errno" not in done.stdout + done.stderr
    assert not (tmp_path / "data" / "support-pg").exists()  # said before anything started
