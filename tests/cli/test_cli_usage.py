"""A wrong word on the command line is refused by the command it was given to: that command's usage, the error, and
for a mistyped flag the flag that was meant (``routegate ask --jsno`` -> ``did you mean '--json'?``), for every
command and every action of a command group. Checked as a user meets it: the command's stderr and exit status."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from routegate.cli import main

from ._env import RUN_CLI, offline_env

# what each command needs besides its options, so that only the wrong flag is wrong
REQUIRED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("triage",): (),
    ("ask",): ("hello",),
    ("chat",): (),
    ("route",): ("hello",),
    ("serve",): (),
    ("ui",): (),
    ("up",): (),
    ("fit",): ("--train", "train.jsonl"),
    ("eval",): ("test.jsonl", "--router", "r"),
    ("plans", "list"): ("--db", "runs.sqlite"),
    ("plans", "show"): ("--db", "runs.sqlite", "key"),
    ("plans", "resume"): ("--db", "runs.sqlite", "--plan", "m:p", "key"),
    ("data",): (),
    ("data", "reset"): (),
    ("desk", "init"): ("gym", "--from-sql", "gym.sql"),
    ("desk", "eval"): ("gym", "questions.jsonl"),
    ("kb", "ingest"): (),
}


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(list(argv))
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def _listed(help_text: str, title: str) -> set[str]:
    """The names under ``title:`` of a ``--help`` (argparse lists each one indented by four spaces)."""
    section = help_text.split(f"{title}:\n", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^    ([\w-]+)\s", section, re.MULTILINE))


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def test_the_table_above_has_every_command_and_action(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _listed(_help(capsys), "commands")
    groups = {"plans", "data", "desk", "kb"}
    assert groups <= commands
    every = {(c,) for c in commands - {"desk", "kb", "plans"}}
    for group in groups:
        every |= {(group, action) for action in _listed(_help(capsys, group), f"{group} commands")}
    assert every == set(REQUIRED), "a command or action is missing from REQUIRED (or REQUIRED names a gone one)"


@pytest.mark.parametrize("command", list(REQUIRED), ids=" ".join)
def test_a_mistyped_flag_is_refused_with_the_commands_usage_and_the_flag_meant(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused(capsys, *command, *REQUIRED[command], "--debgu")
    prog = "routegate " + " ".join(command)
    assert err.startswith(f"usage: {prog} ["), err
    assert err.splitlines()[-1] == f"{prog}: error: unrecognized arguments: --debgu (did you mean '--debug'?)"


def test_the_flag_meant_is_the_commands_own(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "ask", "--desk", "gym", "--jsno", "hello")
    assert err.startswith("usage: routegate ask [")
    assert err.splitlines()[-1] == "routegate ask: error: unrecognized arguments: --jsno (did you mean '--json'?)"
    err = _refused(capsys, "desk", "init", "gym", "--from-sql", "gym.sql", "--tabels=members")
    assert "unrecognized arguments: --tabels=members (did you mean '--tables'?)" in err
    err = _refused(capsys, "kb", "ingest", "--dsk", "gym")
    assert (
        err.splitlines()[-1] == "routegate kb ingest: error: unrecognized arguments: --dsk (did you mean '--desk'?) gym"
    )


def test_a_word_close_to_no_flag_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "plans", "show", "--db", "runs.sqlite", "key", "--zzz", "extra")
    assert err.startswith("usage: routegate plans show [")
    assert err.splitlines()[-1] == "routegate plans show: error: unrecognized arguments: --zzz extra"


def test_a_wrong_flag_before_the_command_gets_the_top_level_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "--verison", "ask", "hello")
    assert err.startswith("usage: routegate [")
    assert err.splitlines()[-1] == "routegate: error: unrecognized arguments: --verison (did you mean '--version'?)"


@pytest.mark.parametrize("group", ["desk", "kb", "plans"])
def test_a_group_without_its_action_shows_its_own_usage(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, group)
    assert err.startswith(f"usage: routegate {group} [")
    assert err.splitlines()[-1] == f"routegate {group}: error: the following arguments are required: ACTION"


def test_the_installed_command_refuses_a_wrong_flag_with_its_usage(tmp_path: Path) -> None:
    """The case as the issue met it, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_CLI, "ask", "--desk", "gym", "--jsno", "who is member 1?"],
        env=offline_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: routegate ask [")
    assert done.stderr.endswith("routegate ask: error: unrecognized arguments: --jsno (did you mean '--json'?)\n")
