"""``routegate eval --desk DIR FILE.jsonl`` (and ``desk eval DIR FILE``, the same implementation): what FILE must
hold is in ``--help``, and a file that does not hold it is refused naming the file, the line and the field, before
the desk or the encoder loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.apps.configured.config import DeskConfigError, builtin_desk_dir
from routegate.apps.configured.evaluate import read_labelled
from routegate.cli import main


def test_help_says_what_the_file_holds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["eval", "--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert '--desk: one JSON object per line: {"text": "<a question>", "route": "POSTGRES" | "VECTOR" |' in out
    assert '"EXTERNAL" | "LLM"}' in out and '--router: one {"text": ..., "label":' in out


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "hi", "route": "LLM"}', "not json"], "line 2: not JSON; write one JSON object per line"),
        (['["hi", "LLM"]'], "line 1: a JSON list, not an object"),
        (['{"route": "LLM"}'], 'line 1: needs "text", the question as a non-empty string (missing)'),
        (['{"text": "", "route": "LLM"}'], 'line 1: needs "text", the question as a non-empty string (got "")'),
        (['{"text": 7, "route": "LLM"}'], 'line 1: needs "text", the question as a non-empty string (got 7)'),
        (["", '{"text": "hi"}'], 'line 2: needs "route" to be one of POSTGRES, VECTOR, EXTERNAL, LLM (missing)'),
        (['{"text": "hi", "route": "SQL"}'], 'line 1: needs "route" to be one of POSTGRES, VECTOR, EXTERNAL, LLM'),
        (["", "  "], "no labelled questions in it"),
    ],
)
def test_a_bad_file_names_the_line_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for command in (["eval", "--desk", str(builtin_desk_dir()), str(bad)], ["desk", "eval", str(tmp_path), str(bad)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {bad}") and message in err, err  # the file first: the desk is not loaded


def test_a_missing_or_unreadable_file_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    desk = str(builtin_desk_dir())
    assert main(["eval", "--desk", desk, str(tmp_path / "nope.jsonl")]) == 2
    assert f"error: {tmp_path / 'nope.jsonl'} does not exist; give a JSONL file" in capsys.readouterr().err
    assert main(["eval", "--desk", desk, str(tmp_path)]) == 2
    assert f"error: {tmp_path} is a directory" in capsys.readouterr().err
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"text": "caf\u00e9", "route": "LLM"}\n'.encode("latin-1"))
    assert main(["eval", "--desk", desk, str(latin)]) == 2
    assert "give a UTF-8 JSONL file" in capsys.readouterr().err


def test_router_options_are_refused_with_a_desk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"text": "hi", "route": "LLM"}\n', encoding="utf-8")
    desk = str(builtin_desk_dir())
    assert main(["eval", "--desk", desk, str(good), "--plot", str(tmp_path / "p.png"), "--unknown-as-oos"]) == 2
    assert "error: --plot, --unknown-as-oos: for --router only, not for --desk; leave them out" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["eval", str(good)])  # neither --router nor --desk
    assert "one of the arguments --router --desk is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", str(good), "--desk", desk, "--router", str(tmp_path)])
    assert "not allowed with argument" in capsys.readouterr().err


def test_eval_with_desk_routes_the_builtin_desks_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "q.jsonl"
    rows = [
        {"text": "Show tickets for customer John", "route": "POSTGRES", "note": "other keys are ignored"},
        {"text": "What is the price of Bitcoin?", "route": "EXTERNAL"},
        {"text": "How do I reset my password?", "route": "LLM"},  # labelled wrong on purpose
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["eval", "--desk", str(builtin_desk_dir()), str(questions), "--json"]) == 0
    by_eval = json.loads(capsys.readouterr().out)
    assert main(["desk", "eval", str(builtin_desk_dir()), str(questions), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_eval
    assert (by_eval["total"], by_eval["correct"]) == (3, 2)
    assert by_eval["misroutes"] == [
        {"text": "How do I reset my password?", "expected": "LLM", "got": "VECTOR", "layer": "rules"}
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=40), st.just('{"text": "hi", "route": "LLM"}')), max_size=5))
def test_any_file_is_questions_or_an_error_naming_it(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "any.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        labelled = read_labelled(path)
    except DeskConfigError as exc:
        message = str(exc)
    else:
        assert labelled and all(route in ("POSTGRES", "VECTOR", "EXTERNAL", "LLM") for _, route in labelled)
        return
    assert message.startswith(str(path))
