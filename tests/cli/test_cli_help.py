"""Every command says what it does: a line in ``routegate --help`` and a description in ``routegate COMMAND --help``
(both written once, as the docstring of the function the command runs). Checked from outside, as a user reads
them; and under ``python -OO``, which strips docstrings, every command still parses and runs its help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from routegate.cli import main

COMMANDS = ("triage", "ask", "chat", "route", "serve", "ui", "up", "fit", "eval", "plans", "data")
ACTIONS = (("plans", "list"), ("plans", "show"), ("plans", "resume"), ("data", "reset"), ("data", "stop"))


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def _words(text: str) -> str:
    return " ".join(text.split())  # argparse wraps to the terminal's width


def test_the_command_list_gives_each_command_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    listing = _words(_help(capsys).split("commands:", 1)[1])
    for command in COMMANDS:
        assert f" {command} " in f" {listing} ", command
    assert "ask ask the support desk one question and print the answer" in listing
    assert "data show where routegate keeps its data (embedded PostgreSQL, router cache) and its size" in listing


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_describes_itself(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, command)
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"usage: routegate {command}")
    description = rest.split("\n\n", 1)[0]
    assert not description.startswith(("positional arguments:", "options:")), f"{command} has no description"
    assert len(_words(description)) > 40


@pytest.mark.parametrize("action", ACTIONS, ids=" ".join)
def test_each_action_has_its_line(action: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    listing = _words(_help(capsys, action[0]))
    assert f"{action[1]} " in listing
    line = listing.split(f" {action[1]} ", 1)[1]
    assert line and not line.startswith(("positional", "options")), action


def test_the_description_ends_with_where_the_data_lives(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path))
    description = _words(_help(capsys, "ask").split("\n\n")[1])
    assert description.startswith("Route one question (Postgres / Vector / External / LLM)")
    assert "is set. Conversations and the embedded PostgreSQL live in the data dir" in description


@pytest.mark.parametrize("argv", [["--help"], ["ask", "--help"], ["plans", "list", "--help"]])
def test_without_docstrings_the_commands_still_parse(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "ROUTEGATE_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-OO", "-c", "import sys; from routegate.cli import main; sys.exit(main())", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: routegate")
