"""One set of input rules: the message check of ``routegate.core.messages`` on every CLI path (``ask``, ``chat``,
``route``, ``triage``), and ``chat`` / ``ask`` starting a new session unless one is named."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import routegate.cli.support as support_cli
from cli._env import go_offline
from routegate.cli import main
from routegate.core.messages import DEFAULT_MAX_MESSAGE_CHARS, InvalidMessageError, check_message
from routegate.server.testing import FakeSupportDesk


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go_offline(monkeypatch, tmp_path / "data")


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch) -> FakeSupportDesk:
    fake = FakeSupportDesk()

    @asynccontextmanager
    async def open_fake(settings: object) -> AsyncIterator[FakeSupportDesk]:
        yield fake

    monkeypatch.setattr(support_cli, "open_support_desk", open_fake)
    return fake


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# -- the rule itself ---------------------------------------------------------------------------------------------
# every code point, surrogates included (st.text leaves them out by default), with NUL and surrogates boosted
ANY_CHAR = st.characters(exclude_categories=()) | st.sampled_from(["\x00", "\ud800", "\udcff", "\udfff", " ", "\n"])


@given(st.text(ANY_CHAR, max_size=80), st.integers(min_value=1, max_value=60))
def test_a_message_is_kept_unchanged_or_refused_with_a_reason(text: str, limit: int) -> None:
    try:
        kept = check_message(text, max_chars=limit)
    except InvalidMessageError as exc:
        refused = exc
    else:
        assert kept is text
        assert text.strip() and len(text) <= limit and "\x00" not in text
        text.encode("utf-8")  # storable and printable as UTF-8
        return
    assert refused.code in ("empty_message", "message_too_long", "invalid_text")
    if refused.code == "invalid_text":
        assert refused.offset is not None
        assert text[refused.offset] == "\x00" or 0xD800 <= ord(text[refused.offset]) <= 0xDFFF
        assert f"position {refused.offset}" in str(refused)
    if refused.code == "message_too_long":
        assert len(text) > limit and str(limit) in str(refused)
    if refused.code == "empty_message":
        assert len(text) <= limit and not text.strip()


@given(st.binary(max_size=40))
def test_bytes_from_argv_are_refused_exactly_when_they_are_not_utf8(raw: bytes) -> None:
    text = raw.decode("utf-8", "surrogateescape")  # what Python makes of a command-line argument
    first_bad: int | None = None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        first_bad = raw[bad.start]
    if first_bad is None:
        if text.strip() and "\x00" not in text:
            assert check_message(text) == text
        return
    with pytest.raises(InvalidMessageError) as refused:
        check_message(text + "x", from_bytes=True)
    assert refused.value.code == "invalid_text"
    if "\x00" not in text:
        assert f"(0x{first_bad:02X})" in str(refused.value)


def test_not_text_and_a_bad_limit() -> None:
    with pytest.raises(InvalidMessageError) as refused:
        check_message(b"bytes")
    assert refused.value.code == "not_text"
    with pytest.raises(ValueError, match="max_chars"):
        check_message("hi", max_chars=0)


# -- the CLI paths -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["route", ""], "empty"),
        (["route", "  \n"], "empty"),
        (["route", "x" * (DEFAULT_MAX_MESSAGE_CHARS + 1)], f"over the {DEFAULT_MAX_MESSAGE_CHARS} limit"),
        (["route", "a\x00b"], "NUL character at position 1"),
        (["triage", ""], "empty"),
        (["ask", "   "], "empty"),
        (["ask", "x" * (DEFAULT_MAX_MESSAGE_CHARS + 1)], "ROUTEGATE_MAX_MESSAGE_CHARS"),
    ],
)
def test_every_path_applies_the_same_rule(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and words in captured.err


def test_route_file_lines_follow_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"text": "ticket 1"}) + "\n" + json.dumps({"text": " "}) + "\n", encoding="utf-8")
    assert main(["route", "--file", str(queries)]) == 2
    assert f"line 2 of {queries}: the message is empty" in capsys.readouterr().err


def test_ask_refuses_before_the_desk_opens(desk: FakeSupportDesk, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "bad \udcff byte"]) == 2
    assert "0xFF) at position 4" in capsys.readouterr().err
    assert desk.histories == {}


def test_chat_refuses_a_bad_line_and_goes_on(
    desk: FakeSupportDesk, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"weather?\nbad \xff line\nnul \x00 here\n/history\n/quit\n")
    assert main(["chat"]) == 0
    captured = capsys.readouterr()
    assert "not valid UTF-8 (0xFF) at position 4" in captured.err
    assert "NUL character at position 4" in captured.err
    assert "Traceback" not in captured.err
    (session,) = desk.histories
    assert [m.content for m in desk.histories[session] if m.role == "user"] == ["weather?"]
    assert "user: weather?" in captured.out


def test_chat_starts_a_new_session_unless_one_is_named(
    desk: FakeSupportDesk, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b"weather?\n")
    assert main(["chat"]) == 0
    _stdin(monkeypatch, b"/history\n")
    assert main(["chat"]) == 0
    first = capsys.readouterr()
    assert len(desk.histories) == 1  # the second run saw an empty history of its own session
    assert "user: weather?" not in first.out
    (session,) = desk.histories
    assert f"--session {session}" in first.err  # the banner says how to continue it
    _stdin(monkeypatch, b"/history\n")
    assert main(["chat", "--session", session]) == 0
    second = capsys.readouterr()
    assert "user: weather?" in second.out


def test_ask_uses_a_new_session_unless_one_is_named(desk: FakeSupportDesk, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "weather?"]) == 0
    assert main(["ask", "weather?"]) == 0
    assert len(desk.histories) == 2
    err = capsys.readouterr().err
    assert all(f"--session {session}" in err for session in desk.histories)  # how to continue each
    assert main(["ask", "weather?", "--session", "mine"]) == 0
    assert main(["ask", "weather?", "--session", "mine"]) == 0
    assert len(desk.histories["mine"]) == 4


@pytest.mark.parametrize("command", ["chat", "ask"])
def test_help_says_where_the_data_dir_is(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "here"))
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = "".join(capsys.readouterr().out.split())  # argparse wraps long paths
    assert "".join(str(tmp_path / "here").split()) in out and "ROUTEGATE_DATA_DIR" in out
