"""Cheap checks of a message's shape, for the router's "I don't know" gate: SQL or code pasted in, and text that
is not English (the rules and the route examples are English-only, so their verdict on it is an accident).

No model and no dictionary: keyword patterns with the punctuation that goes with them, and stop-word counts.
They are tuned to stay quiet on ordinary English questions (the labelled sets in ``tests/data`` check both
ways) — a false alarm sends a real question to the clarifying answer, which costs the user one more turn.
"""

from __future__ import annotations

import json
import re
from typing import Final, Literal

Shape = Literal["SQL", "code"]

_SQL_STATEMENT: Final = re.compile(
    r"\b(select\b.{0,200}?\bfrom|insert\s+into|update\s+\w+\s+set|delete\s+from|drop\s+(table|database|schema)"
    r"|create\s+(table|role|user|function)|alter\s+table|truncate\s+\w+|union\s+(all\s+)?select"
    r"|grant\s+\w+|revoke\s+\w+)\b",
    re.IGNORECASE | re.DOTALL,
)
_SQL_KEYWORDS: Final = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|DROP|CREATE|ALTER|TRUNCATE|GRANT|UNION|FROM|WHERE|INTO|VALUES|TABLE|SET)\b"
)
_SQL_VERBS: Final = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "TRUNCATE", "GRANT"})
_SQL_PUNCTUATION: Final = re.compile(r"[;=*',()]|--")
_CODE_SIGNALS: Final = tuple(
    re.compile(p, re.MULTILINE)
    for p in (
        r"\bdef\s+\w+\s*\(",
        r"^\s*(import|from)\s+[\w.]+",
        r"\bclass\s+\w+\s*[:({]",
        r"=>",
        r"#include\b",
        r"\b(print|console\.log|printf|fetch|open|eval|exec)\s*\(",
        r"\bfunction\s*\w*\s*\(",
        r"\b(const|let|var)\s+\w+\s*=",
        r"\breturn\b",
        r"\bfor\s+\w+\s+in\b.*:",
        r"\w\.\w+\(",
        r"[{}]",
        r";\s*$",
        r"\bself\.\w+",
    )
)
_CODE_SYMBOLS: Final = frozenset('(){}[];=<>"#/\\')
_CODE_MARKS: Final = ("(", "=", ":", ";", "{", "}", "import", "from", "return", "#include", "self.")
"""Text one of the code signals needs (a class needs one of ``:({``): a message with none of them (most
questions) has no signal, and the fourteen searches (13 µs) are skipped."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ENGLISH: Final = _words(
    "the a an is are was of to in on at for with and or my your our me i you we it this that what which where who "
    "how why when do does did can could would should will please show tell list find get give about any all there "
    "their his her he she they be been have has had not no from by as if so hi hello thanks thank"
)
_FOREIGN: Final = _words(
    # French, Spanish, German, Italian, Portuguese function words that are not English words
    "le la les est une des du je vous mon ma mes pour avec quel quelle quels quelles comment où bonjour merci "
    "pouvez puis voudrais connaître aide ai suis pas ne sur dans "
    "el los las es una mi para con qué cuál cómo dónde por favor hace hoy necesito ayuda mis tengo está estado "
    "der das ist und ich mein meine wie welche sind noch nicht sie mir bitte können heute habe ein eine "
    "haben wo wer warum kann "
    "il di che è qual oggi del della sono questo "
    "minha faço como não você meu obrigado"
)
_WORD: Final = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def pasted_shape(text: str) -> Shape | None:
    """``"SQL"`` or ``"code"`` when ``text`` looks pasted in rather than asked, else ``None``."""
    if _looks_like_sql(text):
        return "SQL"
    if _looks_like_code(text):
        return "code"
    return None


def _looks_like_sql(text: str) -> bool:
    statement = _SQL_STATEMENT.search(text) is not None
    if statement and _SQL_PUNCTUATION.search(text):
        return True
    keywords = set(_SQL_KEYWORDS.findall(text))  # keywords written as SQL is written, one of them a statement's verb
    return len(keywords) >= 2 and bool(keywords & _SQL_VERBS)


def _looks_like_code(text: str) -> bool:
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            return True
    if not any(mark in text for mark in _CODE_MARKS):
        return False
    signals = sum(1 for pattern in _CODE_SIGNALS if pattern.search(text))
    if signals != 1:  # none: not code; two or more: code, whatever its symbols
        return signals >= 2
    chars = [c for c in text if not c.isspace()]
    symbols = sum(1 for c in chars if c in _CODE_SYMBOLS) / max(len(chars), 1)
    return symbols >= 0.12


def is_not_english(text: str) -> bool:
    """True when ``text`` reads as French, Spanish, German, Italian or Portuguese rather than English: at least two
    of their function words and more of them than English ones (or one, with ``¿``/``¡`` or no English word)."""
    words = [w.lower() for w in _WORD.findall(text)]
    foreign = sum(1 for w in words if w in _FOREIGN)
    english = sum(1 for w in words if w in _ENGLISH)
    if foreign >= 2 and foreign > english:
        return True
    return foreign >= 1 and english == 0 and any(c in text for c in "¿¡")
