"""``routegate chat`` at a terminal: a pseudo-terminal, keys typed as a person types them. The desk is the shipped
fake (the conversation, not the desk, is under test); the CLI is the real one, in its own process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli._env import offline_env
from cli._tty import CTRL_C, CTRL_D, Terminal

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")

# the real CLI in a process of its own, with the shipped fake desk instead of PostgreSQL
CHAT_ON_FAKE_DESK = """
import sys
from contextlib import asynccontextmanager
import routegate.cli.support as support
from routegate.apps.support.fake import FakeSupportDesk
from routegate.cli import main

desk = FakeSupportDesk()

@asynccontextmanager
async def open_fake(settings):
    yield desk

support.open_support_desk = open_fake
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Terminal]:
    env = offline_env(tmp_path / "data")
    with Terminal([sys.executable, "-c", CHAT_ON_FAKE_DESK, "chat"], env=env) as terminal:
        terminal.read_until(b"you> ")
        yield terminal


def test_ctrl_c_at_the_prompt_ends_the_chat_at_once(chat: Terminal) -> None:
    chat.until_reading()  # the prompt is written before input() reads: Ctrl-C in between waits for the next signal
    chat.type(CTRL_C)  # no Enter after it
    status, rest = chat.wait(within=30)
    assert status == 130, rest
    assert b"interrupted" in rest and b"Traceback" not in rest


def test_ctrl_d_ends_the_chat_on_a_new_line(chat: Terminal) -> None:
    chat.type(CTRL_D)
    status, rest = chat.wait(within=30)
    assert status == 0, rest
    assert rest.startswith(b"\r\n"), rest  # the shell's prompt does not start after "you> "


def test_an_unknown_command_is_said_and_not_sent(chat: Terminal) -> None:
    chat.type(b"/foo\r")
    said = chat.read_until(b"you> ")
    assert b"unknown command /foo; commands: /history /reset /quit" in said
    assert b"desk>" not in said
    chat.type(b"/history\r")
    assert b"(no messages in this session yet)" in chat.read_until(b"you> ")  # the desk never saw /foo
    chat.type(b"/etc/hosts is empty, why?\r")  # a path is a message, not a command
    assert b"answer to: /etc/hosts is empty, why?" in chat.read_until(b"you> ")
    chat.type(b"/quit\r")
    assert chat.wait(within=30)[0] == 0


def test_history_after_reset_says_it_is_empty(chat: Terminal) -> None:
    chat.type(b"what is the weather in Paris?\r")
    assert b"answer to: what is the weather in Paris?" in chat.read_until(b"you> ")
    chat.type(b"/history\r")
    assert b"user: what is the weather in Paris?" in chat.read_until(b"you> ")
    chat.type(b"/reset\r")
    assert b"(conversation cleared)" in chat.read_until(b"you> ")
    chat.type(b"/history\r")
    assert b"(no messages in this session yet)" in chat.read_until(b"you> ")
    chat.type(CTRL_D)
    assert chat.wait(within=30)[0] == 0
