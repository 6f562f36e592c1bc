"""Where the statements of a SQL file begin and end, read once from start to end (linear in the file's size), as
``psql`` reads them: a ``;`` ends a statement unless it is inside a quote (``'...'``, ``E'...'`` with its
backslash escapes, ``"..."``, a ``$tag$`` dollar quote), a comment (``--``, nested ``/* */``), parentheses, or the
``BEGIN ATOMIC ... END`` body of a ``CREATE [OR REPLACE] FUNCTION|PROCEDURE`` (psql's own rule: after those first
words, outside parentheses, ``BEGIN`` opens, ``CASE`` opens inside one, ``END`` closes).

The reader never goes back: a 50 KB function body whose lines end in ``;`` costs one pass, not one pass per line.
What a statement holds is the business of :mod:`.script`, which lexes each statement once with sqlglot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_IDENT_START: Final = r"A-Za-z_\u0080-\U0010ffff"
_TOKEN: Final = re.compile(
    rf"""
      (?P<space>\s+)
    | (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*)
    | (?P<escape_string>[eE]')
    | (?P<string>(?:[bBxXnN]|[uU]&)?')
    | (?P<quoted>(?:[uU]&)?")
    | (?P<dollar>\$(?:[{_IDENT_START}][{_IDENT_START}0-9]*)?\$)
    | (?P<word>[{_IDENT_START}][{_IDENT_START}0-9$]*)
    | (?P<number>[0-9][0-9A-Za-z_.]*)
    | (?P<semicolon>;)
    | (?P<open>\()
    | (?P<close>\))
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_ENDS: Final = {
    "escape_string": re.compile(r"(?:[^'\\]|\\.|'')*+'", re.DOTALL),
    "string": re.compile(r"(?:[^']|'')*+'"),
    "quoted": re.compile(r'(?:[^"]|"")*+"'),
}
_COMMENT_MARK: Final = re.compile(r"/\*|\*/")
_BETWEEN: Final = re.compile(r"(?:\s+|--[^\n]*)*")
_ROUTINE_WORDS: Final = frozenset({"create", "function", "procedure", "or", "replace"})


class Unfinished(Exception):
    """The text ends inside a statement: an unclosed quote, comment, parenthesis or ``BEGIN ATOMIC`` body."""


@dataclass(frozen=True, slots=True)
class Span:
    """One statement: ``text[start:end]`` without its ``;``; ``after`` is where reading goes on (past the ``;``)."""

    start: int
    end: int
    after: int


def skip_between(text: str, position: int) -> int:
    """Past the blanks and ``--`` comments before the next statement (or a psql command line)."""
    found = _BETWEEN.match(text, position)
    return found.end() if found is not None else position


def _block_comment_end(text: str, position: int) -> int:
    """Past the ``*/`` that closes the ``/*`` just before ``position`` (comments nest, as in PostgreSQL)."""
    depth = 1
    for mark in _COMMENT_MARK.finditer(text, position):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end()
    raise Unfinished


class _Routine:
    """psql's rule for ``BEGIN ATOMIC`` bodies: the first four words, and the depth of ``BEGIN ... END``."""

    __slots__ = ("count", "depth", "words")

    def __init__(self) -> None:
        self.depth = 0
        self.words = ["", "", "", ""]
        self.count = 0

    def word(self, word: str, parentheses: int) -> None:
        lower = word.lower()
        if lower in _ROUTINE_WORDS and self.count < 4:
            self.words[self.count] = lower[0]
        self.count += 1
        first = self.words
        routine = first[0] == "c" and (
            first[1] in ("f", "p") or (first[1] == "o" and first[2] == "r" and first[3] in ("f", "p"))
        )
        if not routine or parentheses:
            return
        if lower == "begin" or (lower == "case" and self.depth >= 1):
            self.depth += 1
        elif lower == "end" and self.depth > 0:
            self.depth -= 1


def statement_at(text: str, start: int) -> Span:
    """The statement that begins at ``start`` (a non-blank character): up to its ``;``, or to the end of the text
    when it has none. :class:`Unfinished` when the text ends inside a quote, comment, parenthesis or body."""
    position = start
    parentheses = 0
    routine = _Routine()
    length = len(text)
    while position < length:
        token = _TOKEN.match(text, position)
        assert token is not None  # the last alternative takes any character
        kind = token.lastgroup
        position = token.end()
        if kind == "semicolon":
            if parentheses == 0 and routine.depth == 0:
                return Span(start, token.start(), position)
        elif kind == "word":
            routine.word(token.group(), parentheses)
        elif kind == "open":
            parentheses += 1
        elif kind == "close":
            parentheses = max(0, parentheses - 1)
        elif kind == "block_comment":
            position = _block_comment_end(text, position)
        elif kind == "dollar":
            close = text.find(token.group(), position)
            if close < 0:
                raise Unfinished
            position = close + len(token.group())
        elif kind in _ENDS:
            end = _ENDS[str(kind)].match(text, position)
            if end is None:
                raise Unfinished
            position = end.end()
    if parentheses or routine.depth:
        raise Unfinished
    return Span(start, length, length)
