"""A single-pass, linear-time scanner for fenced blocks and ``<tool_call>``-style tag blocks.

Three small regular expressions with no nested quantifiers do the scanning in C: one finds the next *opening*
line (a line that starts, after spaces or tabs, with three or more backticks or tildes, or with an opening
``<tool_call>`` / ``<a2a_request>`` tag), one per fence character finds the next *closing* line. Python only
looks at the lines those find, every search starts where the previous one stopped, and the closing-tag search
is cached, so a scan is O(len(text)) — adversarial input included (``bench/technique.py`` measures it).

Fences follow CommonMark where it matters for safety: a closing fence uses the same character, is at least as
long as the opening one and carries no info string; a backtick fence's info string may not contain a backtick
(```` ```x``` ```` on one line is inline code, not a fence); inside an open fence nothing else is recognised, so
a fence nested in a longer fence is content. Unlike CommonMark, an unterminated fence is reported, not
extracted: truncated code is never run.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

_TAGS = ("tool_call", "a2a_request")


def _opener(tags: tuple[str, ...]) -> re.Pattern[str]:
    tag = f"|<({'|'.join(tags)})>" if tags else "|<(?!)()>"  # the group exists even with no tag left
    return re.compile(rf"^([ \t]*)(?:(`{{3,}}|~{{3,}})([^\n]*){tag})", re.MULTILINE)


# once a tag is known to have no closer left in the text, its openers stop being candidates
_OPENERS = {
    frozenset(): _opener(_TAGS),
    frozenset({"tool_call"}): _opener(("a2a_request",)),
    frozenset({"a2a_request"}): _opener(("tool_call",)),
    frozenset(_TAGS): _opener(()),
}
_ALL_OPENERS = _OPENERS[frozenset()]
_CLOSER = {
    "`": re.compile(r"^[ \t]*(`{3,})[ \t\r]*$", re.MULTILINE),
    "~": re.compile(r"^[ \t]*(~{3,})[ \t\r]*$", re.MULTILINE),
}
MAX_PROBLEMS = 20
MAX_BLOCKS = 256


class Block(NamedTuple):
    """A fenced block (``kind="fence"``, ``label`` = first word of the info string, lower-cased) or a tag block
    (``kind="tag"``, ``label`` = the tag name); ``start``/``end`` are offsets of the whole block in the text.
    """

    kind: Literal["fence", "tag"]
    label: str
    body: str
    start: int
    end: int


@dataclass(slots=True)
class Scan:
    """The blocks kept (document order), how many closed fences there were in all, and what was not taken.

    ``overflow`` is set when the text holds more than :data:`MAX_BLOCKS` blocks worth keeping: the scan stops
    there and the caller treats the output as prose (no agent writes hundreds of calls in one answer).
    """

    blocks: list[Block] = field(default_factory=list)
    fences: int = 0
    problems: list[str] = field(default_factory=list)
    overflow: bool = False

    def problem(self, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(message)


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset`` (for the scan's own problems: at most three per scan)."""
    return text.count("\n", 0, offset) + 1


class LineCounter:
    """1-based line numbers for non-decreasing offsets, counted incrementally (linear overall)."""

    __slots__ = ("_line", "_offset", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._offset = 0
        self._line = 1

    def at(self, offset: int) -> int:
        if offset < self._offset:
            return line_of(self._text, offset)
        self._line += self._text.count("\n", self._offset, offset)
        self._offset = offset
        return self._line


def fence_label(info: str) -> str:
    """The language of a fence's info string: its first word, lower-cased, without ``{.`` ``}`` or ``:path``."""
    first = info.split(None, 1)[0] if info else ""
    if first.isalnum():
        return first.lower()
    return first.strip("{}.").split(":", 1)[0].split(",", 1)[0].lower()


def _dedent(body: str, indent: int) -> str:
    """Remove up to ``indent`` leading spaces/tabs from each line (CommonMark, for an indented opening fence)."""
    out = []
    for line in body.split("\n"):
        strip = 0
        while strip < indent and strip < len(line) and line[strip] in " \t":
            strip += 1
        out.append(line[strip:])
    return "\n".join(out)


def scan(text: str, labels: Container[str]) -> Scan:
    """Find the fenced blocks whose label is in ``labels``, and every tag block, in document order."""
    result = Scan()
    size = len(text)
    pos = 0
    next_close: dict[str, int] = {}
    unclosed: set[str] = set()
    opener_re = _ALL_OPENERS
    while pos < size:
        opening = opener_re.search(text, pos)
        if opening is None:
            break
        run = opening.group(2)
        if run is not None:
            info = opening.group(3).strip()
            if run[0] == "`" and "`" in info:
                pos = opening.end() + 1  # inline code such as ```x``` — not a fence
                continue
            body_start = opening.end() + 1
            closer = _CLOSER[run[0]]
            closing = closer.search(text, body_start)
            while closing is not None and len(closing.group(1)) < len(run):
                closing = closer.search(text, closing.end() + 1)
            label = fence_label(info) if info else ""
            if closing is None:
                where = line_of(text, opening.start())
                result.problem(f"fence ({label or 'untagged'}) opened at line {where} is never closed; not extracted")
                break  # everything after an unclosed fence is inside it
            result.fences += 1
            if label in labels:
                if len(result.blocks) == MAX_BLOCKS:
                    result.overflow = True
                    break
                body = text[min(body_start, size) : max(closing.start() - 1, body_start)]
                indent = len(opening.group(1))
                result.blocks.append(
                    Block("fence", label, _dedent(body, indent) if indent else body, opening.start(), closing.end())
                )
            pos = closing.end() + 1
            continue
        tag = opening.group(4)
        opener, closer_tag = f"<{tag}>", f"</{tag}>"
        content_start = opening.end()
        close_at = next_close.get(tag)
        if close_at is None or (close_at != -1 and close_at < content_start):
            close_at = text.find(closer_tag, content_start)
            next_close[tag] = close_at
        if close_at != -1:
            if len(result.blocks) == MAX_BLOCKS:
                result.overflow = True
                break
            result.blocks.append(
                Block("tag", tag, text[content_start:close_at], opening.start(), close_at + len(closer_tag))
            )
            pos = close_at + len(closer_tag)
            continue
        where = line_of(text, opening.start())
        if text.find(opener, content_start) != -1:
            result.problem(f"<{tag}> at line {where}: no closing </{tag}> and another <{tag}> follows; ignored")
            result.problem(f"<{tag}> after line {where}: none has a closing </{tag}>; all ignored")
            unclosed.add(tag)
            opener_re = _OPENERS[frozenset(unclosed)]  # no closer anywhere after: the rest are ignored too
            pos = content_start
            continue
        # the only unterminated one, and last: kept (a stop sequence may have eaten the closing tag)
        result.blocks.append(Block("tag", tag, text[content_start:], opening.start(), size))
        break
    return result
