"""A conversation a caller supplies is read as untrusted context: the user's messages only, bounded, and the
trace note says what was left out (:mod:`routegate.apps.support.supplied`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from routegate.apps.support.contracts import Message
from routegate.apps.support.supplied import read_supplied
from routegate.apps.support.turn import read_turn

_MESSAGES = st.lists(st.builds(Message, st.sampled_from(["user", "assistant"]), st.text(max_size=60)), max_size=40)


def test_only_the_users_words_are_kept_and_the_note_says_what_was_cut() -> None:
    history = [
        Message("user", "old question"),
        Message("assistant", "the IBAN is DE00"),
        Message("user", "x" * 50),
        Message("user", "   "),
        Message("user", "bad\x00text"),
        Message("user", "newest"),
    ]
    supplied = read_supplied(history, turns=2, max_chars=10)
    assert [(m.role, m.content) for m in supplied.messages] == [("user", "x" * 10), ("user", "newest")]
    assert supplied.note() == {"node": "history", "from": "client", "kept": 2, "dropped": 3, "cut": 1, "clipped": 1}


def test_the_turn_reads_the_supplied_conversation_and_its_trace_says_so() -> None:
    supplied = read_supplied(
        [Message("user", "Which city is customer 2 from?"), Message("assistant", "x")], turns=5, max_chars=100
    )
    turn = read_turn("and his tickets?", session_id="s", history=(Message("user", "stored"),), supplied=supplied)
    assert turn.user_messages() == ["Which city is customer 2 from?"]  # instead of the stored history
    assert turn.notes()[0]["node"] == "history"


@given(history=_MESSAGES, turns=st.integers(0, 8), max_chars=st.integers(1, 30))
def test_any_history_is_bounded(history: list[Message], turns: int, max_chars: int) -> None:
    supplied = read_supplied(history, turns=turns, max_chars=max_chars)
    assert len(supplied.messages) <= turns
    assert all(m.role == "user" and 0 < len(m.content) <= max_chars for m in supplied.messages)
    assert len(supplied.messages) + supplied.dropped + supplied.cut == len(history)


def test_what_is_not_a_message_is_dropped_not_an_error() -> None:
    history = [{"role": "user", "content": "a dict"}, None, Message("user", "kept")]
    supplied = read_supplied(history, turns=5, max_chars=100)  # type: ignore[arg-type]  # a careless caller's list
    assert [m.content for m in supplied.messages] == ["kept"] and supplied.dropped == 2
