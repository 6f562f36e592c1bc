"""A single-pass, linear-time scanner for fenced blocks and ``<tool_call>``-style tag blocks.

Three small regular expressions with no nested quantifiers do the scanning in C: one finds the next *opening*
line (a line that starts, after spaces or tabs, with three or more backticks or tildes, or with an opening
``<tool_call>`` / ``<a2a_request>`` tag), one per fence character finds the next *closing* line. Python only
looks at the lines those find, every search starts where the previous one stopped, and the closing-tag search
is cached, so a scan is O(len(text)) — adversarial input included (``bench/technique.py`` measures it).

Two bounds keep the Python part small whatever the input: at most :data:`MAX_BLOCKS` blocks worth keeping, and
at most :func:`marker_line_limit` *marker lines* examined — every line a search stops at: a candidate opening
line (fence, one-line ```` ```x``` ````, or tag) and every closing-fence candidate (too-short ones included).
That limit is 256 lines plus one per :data:`MARKER_LINE_CHARS` characters of text, and never more than
:data:`MAX_MARKER_LINES`. Past either bound the scan stops and :attr:`Scan.overflow` says why; the classifier then
answers prose. Each marker line costs a regex search and some Python (about 0.4 µs), so without the line bound
a megabyte of ```` ```\n ```` (250,000 fence lines) took over 0.1 s; with it, the per-line work is at most
8,192 lines (~3 ms) and, past the first 256 lines, about 25 ns per character of text (0.4 µs per 16) even on the
densest input, and the rest runs at regex speed.

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
MAX_MARKER_LINES = 8192
"""Fence and tag lines a scan examines at most, whatever the length (real answers have tens; the bench's 2 MB
of realistic prose with data fences has about 5,100)."""
MARKER_LINE_CHARS = 16
"""Past the first 256, one fence or tag line allowed per this many characters (an answer with a one-line code
block, fences included, between every two short sentences is still well inside)."""
_TOO_MANY_BLOCKS = f"more than {MAX_BLOCKS} fenced or tag blocks; not routed"


def marker_line_limit(size: int) -> int:
    """How many fence or tag lines a scan of ``size`` characters examines before it gives up."""
    return min(MAX_MARKER_LINES, 256 + size // MARKER_LINE_CHARS)


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

    ``overflow`` says why the scan stopped early — more than :data:`MAX_BLOCKS` blocks worth keeping, or more
    than :func:`marker_line_limit` fence or tag lines examined — and is empty otherwise; the caller then treats
    the output as prose (no agent writes hundreds of calls, or a fence line every few words, in one answer).
    """

    blocks: list[Block] = field(default_factory=list)
    fences: int = 0
    problems: list[str] = field(default_factory=list)
    overflow: str = ""

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
    fences = 0
    next_close: dict[str, int] = {}
    unclosed: set[str] = set()
    opener_re = _ALL_OPENERS
    limit = 256 + size // MARKER_LINE_CHARS  # marker_line_limit(size), inlined
    if limit > MAX_MARKER_LINES:
        limit = MAX_MARKER_LINES
    budget = limit  # marker lines left to examine
    while pos < size:
        opening = opener_re.search(text, pos)
        if opening is None:
            break
        budget -= 1
        if budget < 0:
            break
        indent, run, info, tag = opening.groups()
        if run is not None:
            info = info.strip()
            body_start = opening.end() + 1
            if run[0] == "`" and "`" in info:
                pos = body_start  # inline code such as ```x``` — not a fence
                continue
            closer = _CLOSER[run[0]]
            closing = closer.search(text, body_start)
            while closing is not None and len(closing.group(1)) < len(run):
                budget -= 1  # a closing candidate too short for this fence: content
                if budget < 0:
                    closing = None
                    break
                closing = closer.search(text, closing.end() + 1)
            label = fence_label(info) if info else ""
            if closing is None:
                if budget < 0:
                    break  # over the line bound, reported below
                where = line_of(text, opening.start())
                result.problem(f"fence ({label or 'untagged'}) opened at line {where} is never closed; not extracted")
                break  # everything after an unclosed fence is inside it
            budget -= 1  # the closing line (checked with the next opening line, or below)
            fences += 1
            if label in labels:
                if len(result.blocks) == MAX_BLOCKS:
                    result.overflow = _TOO_MANY_BLOCKS
                    break
                body = text[min(body_start, size) : max(closing.start() - 1, body_start)]
                result.blocks.append(
                    Block(
                        "fence", label, _dedent(body, len(indent)) if indent else body, opening.start(), closing.end()
                    )
                )
            pos = closing.end() + 1
            continue
        opener, closer_tag = f"<{tag}>", f"</{tag}>"
        content_start = opening.end()
        close_at = next_close.get(tag)
        if close_at is None or (close_at != -1 and close_at < content_start):
            close_at = text.find(closer_tag, content_start)
            next_close[tag] = close_at
        if close_at != -1:
            if len(result.blocks) == MAX_BLOCKS:
                result.overflow = _TOO_MANY_BLOCKS
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
    result.fences = fences
    if budget < 0 and not result.overflow:
        result.overflow = f"more than {limit} fence or tag lines in {size} characters; not routed"
    return result
