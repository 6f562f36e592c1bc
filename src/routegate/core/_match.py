"""The provenance matcher: could this argument value have come from that source?

A value a model puts in an argument is rarely a byte-for-byte copy of what it read: it trims, re-cases,
re-spaces, re-formats numbers, picks one field of a structured output. The matcher answers "could it have come
from here" by comparing normal forms, each built once when a source is recorded:

* **words** — the text's word characters (Unicode NFKC, case-folded), one space between words: ``"Bob  Smith,"``
  and ``"bob smith"`` are the same words. A text value matches a source when its words are a run of the
  source's words (``"bob smith"`` is in ``"Pay Bob Smith today"``, ``"bob"`` is not in ``"bobby"``).
* **compact** — the same characters with nothing between them, for values of at least
  :data:`MIN_COMPACT` characters: an IBAN or a phone number written in groups (``"GB29 NWBK 6016"``) or split
  across lines still matches ``"GB29NWBK6016"``.
* **numbers** — every number the text holds, read with ``,`` or ``.`` as the thousands separator, and every
  number leaf of a structured value: ``100``, ``100.0``, ``"100.00"`` and ``"€1,000"`` vs ``1000`` all match.

A structured value (a mapping, a list, a pydantic model dumped to a dict) is flattened to its leaves, each with
its path (``payees[1].iban``), and a mapping's keys are leaves too, so a value is matched to the field it was
read from. Every walk is bounded (:data:`MAX_DEPTH`, :data:`MAX_LEAVES`, :data:`MAX_TEXT` per text and
:data:`MAX_SOURCE_TEXT` per source): a source larger than that is cut, which can only make a value *not* match
(fail closed) — a tool's output cannot make the matcher slow.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

MIN_COMPACT = 6
"""The shortest value (in word characters) matched with its separators ignored; shorter ones match as words."""
MAX_DEPTH = 32
MAX_LEAVES = 10_000
MAX_TEXT = 200_000
MAX_SOURCE_TEXT = 1_000_000

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"(?<![\w.,])[-+]?\d+(?:[.,]\d+)*(?![\w])")
_NUMERIC_TEXT = re.compile(r"[-+]?\d+(?:[.,]\d+)*")
_DIGITS = re.compile(r"\d+")
_CURRENCY = " \t$€£¥₹"


def words(text: str) -> str:
    """The normal form a text is compared in: NFKC, case-folded, its word characters, one space between words."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text[:MAX_TEXT]).casefold()))


def numbers_in(text: str) -> frozenset[Decimal]:
    """Every number ``text`` could be read as (with ``,`` or ``.`` as the thousands separator, and each group of
    digits alone: ``"2026-11-25"`` holds 2026, 11 and 25)."""
    found: set[Decimal] = set()
    for token in _NUMBER.findall(unicodedata.normalize("NFKC", text[:MAX_TEXT])):
        found.update(_readings(token))
        found.update(Decimal(part) for part in _DIGITS.findall(token))
    return frozenset(found)


def _readings(token: str) -> set[Decimal]:
    """``token`` read with ``,`` as the thousands separator, and with ``.`` as it (``,`` then the decimal point)."""
    readings: set[Decimal] = set()
    for candidate in (token.replace(",", ""), token.replace(".", "").replace(",", ".")):
        if candidate.count(".") > 1:
            continue
        try:
            readings.add(Decimal(candidate))
        except InvalidOperation:
            continue
    return readings


def as_numbers(value: object) -> frozenset[Decimal]:
    """The numbers ``value`` is: itself when it is one (not a bool), or the readings of a text that holds only a
    number (``"1,000.50"``, ``"€ 1.000,50"``); empty otherwise."""
    if isinstance(value, bool):
        return frozenset()
    if isinstance(value, int | Decimal):
        return frozenset({Decimal(value)}) if not isinstance(value, Decimal) or value.is_finite() else frozenset()
    if isinstance(value, float):
        return frozenset({Decimal(repr(value))}) if math.isfinite(value) else frozenset()
    if isinstance(value, str):
        text = unicodedata.normalize("NFKC", value[:64]).strip(_CURRENCY)
        if _NUMERIC_TEXT.fullmatch(text):
            return frozenset(_readings(text.lstrip("+")))
    return frozenset()


class Fragment:
    """One leaf of a source in its normal forms, with where it sits in the source (``""`` for the whole). The
    numbers a text holds are read the first time a number is looked for in it."""

    __slots__ = ("_numbers", "_text", "compact", "path", "words")

    def __init__(self, path: str, leaf: str | int | float | Decimal) -> None:
        self.path = path
        if isinstance(leaf, str):
            normal = words(leaf)
            self._text: str | None = leaf
            self._numbers: frozenset[Decimal] | None = None
        else:
            normal = words(str(leaf))
            self._text = None
            self._numbers = as_numbers(leaf)
        self.words = f" {normal} "
        self.compact = normal.replace(" ", "")

    @property
    def numbers(self) -> frozenset[Decimal]:
        if self._numbers is None:
            self._numbers = numbers_in(self._text or "")
        return self._numbers


def fragments(value: object) -> Iterator[Fragment]:
    """The leaves of ``value`` (and the keys of its mappings) as fragments, breadth-first and bounded."""
    budget, text_left = MAX_LEAVES, MAX_SOURCE_TEXT
    queue: deque[tuple[str, object, int]] = deque([("", value, 0)])
    while queue and budget > 0 and text_left > 0:
        path, item, depth = queue.popleft()
        if isinstance(item, Mapping):
            if depth >= MAX_DEPTH:
                continue
            for key, child in item.items():
                budget -= 1
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str):
                    text_left -= len(key)
                    yield Fragment(where, key)
                queue.append((where, child, depth + 1))
        elif isinstance(item, list | tuple):
            if depth >= MAX_DEPTH:
                continue
            for index, child in enumerate(item):
                budget -= 1
                queue.append((f"{path}[{index}]", child, depth + 1))
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, str | int | float | Decimal):
            budget -= 1
            if isinstance(item, str):
                item = item[: min(MAX_TEXT, text_left)]
                text_left -= len(item)
            yield Fragment(path, item)


def leaves(value: object) -> Iterator[object]:
    """The scalar leaves of an argument value (strings and numbers; keys of mappings included), bounded."""
    budget = MAX_LEAVES
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack and budget > 0:
        item, depth = stack.pop()
        budget -= 1
        if isinstance(item, Mapping):
            if depth < MAX_DEPTH:
                for key, child in item.items():
                    stack.append((key, depth + 1))
                    stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            if depth < MAX_DEPTH:
                stack.extend((child, depth + 1) for child in item)
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, str | int | float | Decimal):
            yield item


@dataclass(frozen=True, slots=True)
class Probe:
    """One scalar of an argument in the matcher's normal forms (built once, compared with every fragment)."""

    numbers: frozenset[Decimal]
    words: str
    compact: str

    @classmethod
    def of(cls, leaf: object) -> Probe | None:
        """``leaf``'s probe; ``None`` when it carries nothing to trace (a text without a word character)."""
        numbers = as_numbers(leaf)
        normal = words(leaf) if isinstance(leaf, str) else ""
        if not normal and not numbers:
            return None
        compact = normal.replace(" ", "")
        return cls(numbers, f" {normal} " if normal else "", compact if len(compact) >= MIN_COMPACT else "")

    def found_in(self, fragment: Fragment) -> bool:
        """Could this value have been read from ``fragment``?"""
        if self.numbers and not self.numbers.isdisjoint(fragment.numbers):
            return True
        if self.words and self.words in fragment.words:
            return True
        return bool(self.compact) and self.compact in fragment.compact
