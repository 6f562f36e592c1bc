"""A conversation the caller supplies for a turn (an OpenAI client's ``messages``), read as untrusted context.

A turn that has no stored conversation (``POST /v1/chat/completions`` without ``user`` or ``X-Session-Id``) may
bring the one its client keeps. The desk reads it as the user's own earlier words, and as nothing more:

* only the user's messages are kept. What the client says the desk answered (``assistant``), what it says a tool
  returned (``tool``, ``function``) and its ``system`` or ``developer`` instructions are dropped: none is evidence,
  none is the desk's earlier answer, none changes the desk's policy or its prompts. The provenance ledger labels
  every kept message ``user`` (never ``tool:memory``), so a value that only a forged answer holds passes no flow
  rule that asks for a tool's output, and no language model is shown a forged answer as its own.
* it is bounded: the newest ``turns`` user messages (as many turns as a session's memory keeps), each cut to
  ``max_chars`` characters (the desk's message bound); a message that is blank or holds a NUL or a lone surrogate is dropped.
  :meth:`SuppliedHistory.note` says what was cut, in the turn's trace.
* a follow-up is then read against those messages as the tools read a session's earlier messages: "and his
  tickets?" after "which city is customer 2 from?" asks for customer 2's tickets, looked up in the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from routegate.apps.support.contracts import Message
from routegate.core.messages import text_problem


@dataclass(frozen=True, slots=True)
class SuppliedHistory:
    """The part of a supplied conversation a turn reads (:attr:`messages`, the user's, oldest first) and what
    was left out: ``dropped`` messages that are not the user's, or not text, ``cut`` user messages older than the
    bound, ``clipped`` messages cut to ``max_chars``."""

    messages: tuple[Message, ...]
    dropped: int = 0
    cut: int = 0
    clipped: int = 0

    def note(self) -> dict[str, Any]:
        """The trace entry: ``{"node": "history", "from": "client", "kept": 3, ...}``."""
        return {
            "node": "history",
            "from": "client",
            "kept": len(self.messages),
            "dropped": self.dropped,
            "cut": self.cut,
            "clipped": self.clipped,
        }


def read_supplied(history: Iterable[Message], *, turns: int, max_chars: int) -> SuppliedHistory:
    """``history`` as a turn reads it (see the module's text): the newest ``turns`` user messages, each at most
    ``max_chars`` characters (anything that is not a :class:`Message` is dropped too)."""
    users: list[Message] = []
    dropped = 0
    for message in history:
        text = message.content if isinstance(message, Message) and isinstance(message.content, str) else ""
        if not text.strip() or message.role != "user" or text_problem(text) is not None:
            dropped += 1
        else:
            users.append(message)
    newest = users[-turns:] if turns > 0 else []
    kept = tuple(Message("user", m.content[:max_chars], m.created_at) for m in newest)
    clipped = sum(1 for m in newest if len(m.content) > max_chars)
    return SuppliedHistory(kept, dropped, len(users) - len(newest), clipped)
