"""The provenance matcher: could this argument value have come from that source?

A value a model puts in an argument is rarely a byte-for-byte copy of what it read: it trims, re-cases,
re-spaces, re-formats numbers, picks one field of a structured output. The matcher answers "could it have come
from here" by comparing normal forms, each built once when a source is recorded:

* **words** — the text's tokens (Unicode NFKC, case-folded), one space between them: ``"Bob  Smith,"`` and
  ``"bob smith"`` are the same words. A token is a number (below) or a run of word characters. A text value
  matches a source when its words are a run of the source's words (``"bob smith"`` is in ``"Pay Bob Smith
  today"``, ``"bob"`` is not in ``"bobby"``).
* **compact** — the same tokens with nothing between them, for values of at least :data:`MIN_COMPACT`
  characters: an IBAN or a phone number written in groups (``"GB29 NWBK 6016"``) or split across lines still
  matches ``"GB29NWBK6016"``.
* **numbers** — a number in a text is one token with its sign, its thousands separators and its decimals
  (``"-900"``, ``"3,000"``, ``"1.234,50"``), read as one value (:func:`number_of`), and every number leaf of a
  structured value is one too: ``100``, ``100.0``, ``"100.00"`` and ``"€1,000"`` vs ``1000`` all match, but
  ``"3,000"`` and ``"3.000"`` are three thousand (not the user's ``3``) and ``"-900"`` is not ``900``. A value
  that is a number is matched as a number only. In words a number token is written the same way for every
  format (``"1.000,50"`` and ``"1,000.50"`` are the word ``1000.50``).

A structured value (a mapping, a list, a pydantic model dumped to a dict) is flattened to its leaves, each with
its path (``payees[1].iban``), and a mapping's keys are leaves too, so a value is matched to the field it was
read from. Every walk is bounded (:data:`MAX_DEPTH`, :data:`MAX_LEAVES`, :data:`MAX_TEXT` per text and
:data:`MAX_SOURCE_TEXT` per source). A source larger than that is cut, which can only make a value *not* match
(fail closed) — a tool's output cannot make the matcher slow. An argument value larger than that, or one with
nothing to trace (no word character or number: ``"../../"``, ``":(){ :|:& };:"``, a blank, a flag, an object of
another type), cannot be checked: :func:`probes` says so (:class:`Unchecked`) instead of skipping it, and a rule
refuses it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal

MIN_COMPACT = 6
"""The shortest value (in word characters) matched with its separators ignored; shorter ones match as words."""
MAX_DEPTH = 32
MAX_LEAVES = 10_000
MAX_TEXT = 200_000
MAX_SOURCE_TEXT = 1_000_000
MAX_NUMBER_DIGITS = 40
"""A longer run of digits is a word (an identifier), not a number: it is matched as written."""

_SIGNS = "+\u2212-"  # the minus sign U+2212 too (NFKC leaves it as it is); "-" last: not a range in a class
# a number token: its sign (when no word character is glued before it), its groups of digits joined by ',' or '.';
# possessive, so that "3,000abc" is no number at all rather than the number 3 followed by a word
_NUMBER_TOKEN = rf"(?:(?<!\w)[{_SIGNS}])?(?<![\w.,])\d++(?:[.,]\d++)*+(?!\w)"
_TOKEN = re.compile(rf"{_NUMBER_TOKEN}|\w+")
_RESPELT = "+\u2212"  # a token starting so, or holding a separator, is a number written another way
_NUMBER = re.compile(_NUMBER_TOKEN)
_DIGITS = re.compile(r"\d+")
_CURRENCY = " \t$€£¥₹"


def _split_number(token: str) -> tuple[str, str, str | None] | None:
    """A number token as ``(sign, integer digits, decimal digits or None)``, its separators read: with both ``,``
    and ``.`` the last one is the decimal point and the other separates thousands; with one of them several times
    it separates thousands; once, it separates thousands when exactly three digits follow it and the digits before
    it may start a number (``"3,000"``, ``"1.500"``), else it is the decimal point (``"3,5"``, ``"0.125"``).
    ``None`` when the groups fit no reading (``"1,2,3"``, ``"10.0.0.1"``): a list, a version, an address."""
    sign = "-" if token[0] in "-\u2212" else ""
    body = token.lstrip(_SIGNS)
    commas, dots = body.count(","), body.count(".")
    if not commas and not dots:
        return sign, body, None
    groups = body.replace(",", ".").split(".")
    if commas and dots:
        point = "," if body.rfind(",") > body.rfind(".") else "."
        if body.count(point) != 1:
            return None
        whole, fraction = groups[:-1], groups[-1]
    elif commas + dots > 1 or (len(groups[1]) == 3 and _starts_groups(groups[0])):
        whole, fraction = groups, None
    else:
        return sign, groups[0], groups[1]
    if len(whole) > 1 and not (_starts_groups(whole[0]) and all(len(group) == 3 for group in whole[1:])):
        return None
    return sign, "".join(whole), fraction


def _starts_groups(digits: str) -> bool:
    """Can ``digits`` be the first group of a number written in groups of three (``1`` to ``999``)?"""
    return len(digits) <= 3 and digits[0] != "0"


def number_of(token: str) -> Decimal | None:
    """The value of a number token (``"-1.234,50"`` → ``-1234.50``); ``None`` when its groups fit no reading or
    it has more than :data:`MAX_NUMBER_DIGITS` digits."""
    parts = _split_number(token)
    if parts is None:
        return None
    sign, whole, fraction = parts
    if len(whole) + len(fraction or "") > MAX_NUMBER_DIGITS:
        return None
    return Decimal(f"{sign}{whole}.{fraction}" if fraction is not None else f"{sign}{whole}")


def _number_word(token: str) -> str:
    """A number token as a word: one spelling for every format (``"1.000,50"`` → ``"1000.50"``, ``"+44"`` →
    ``"44"``, ``"0958"`` stays), or its groups as separate words when they fit no reading."""
    parts = _split_number(token)
    if parts is None:
        return " ".join(_DIGITS.findall(token))
    sign, whole, fraction = parts
    return f"{sign}{whole}.{fraction}" if fraction is not None else f"{sign}{whole}"


def words(text: str) -> str:
    """The normal form a text is compared in: NFKC, case-folded, its tokens (numbers written one way), one space
    between them."""
    tokens = _TOKEN.findall(unicodedata.normalize("NFKC", text[:MAX_TEXT]).casefold())
    return " ".join([_number_word(t) if t[0] in _RESPELT or "," in t or "." in t else t for t in tokens])


def numbers_in(text: str) -> frozenset[Decimal]:
    """Every number ``text`` holds, each token read once (``"2026-11-25"`` holds 2026, 11 and 25; ``"3,000"``
    holds 3000 only); the groups of a token that fits no reading (``"1,2,3"``) are numbers of their own."""
    found: set[Decimal] = set()
    for token in _NUMBER.findall(unicodedata.normalize("NFKC", text[:MAX_TEXT])):
        value = number_of(token)
        if value is not None:
            found.add(value)
        elif _split_number(token) is None:
            found.update(Decimal(part) for part in _DIGITS.findall(token) if len(part) <= MAX_NUMBER_DIGITS)
    return frozenset(found)


def as_numbers(value: object) -> frozenset[Decimal]:
    """The number ``value`` is: itself when it is one (not a bool), or the value of a text that holds only a
    number (``"1,000.50"``, ``"€ 1.000,50"``, ``"-900"``); empty otherwise."""
    if isinstance(value, bool):
        return frozenset()
    if isinstance(value, int | Decimal):
        return frozenset({Decimal(value)}) if not isinstance(value, Decimal) or value.is_finite() else frozenset()
    if isinstance(value, float):
        return frozenset({Decimal(repr(value))}) if math.isfinite(value) else frozenset()
    if isinstance(value, str) and len(value) <= MAX_TEXT:
        text = unicodedata.normalize("NFKC", value).strip(_CURRENCY)
        if len(text) <= 2 * MAX_NUMBER_DIGITS and _NUMBER.fullmatch(text):
            number = number_of(text)
            return frozenset() if number is None else frozenset({number})
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


_TAIL = re.compile(rf"[\w.,{_SIGNS}]+\Z")


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
                cut = min(MAX_TEXT, text_left)
                if len(item) > cut:  # cut where a token ends: "3,000" cut after "3" would hold the number 3
                    item = _TAIL.sub("", item[:cut])
                text_left -= len(item)
            yield Fragment(path, item)


@dataclass(frozen=True, slots=True)
class Unchecked:
    """Part of an argument value the matcher cannot check, and why: ``too_long`` (a text over :data:`MAX_TEXT`
    characters), ``too_large`` (over :data:`MAX_LEAVES` values), ``too_deep`` (nested deeper than
    :data:`MAX_DEPTH`) or ``no_text`` (nothing to trace: no word character or number)."""

    why: str
    detail: str


def _probe_or_unchecked(leaf: object) -> Probe | Unchecked:
    if isinstance(leaf, str) and len(leaf) > MAX_TEXT:
        return Unchecked("too_long", f"a text of {len(leaf)} characters, over the {MAX_TEXT} the matcher reads")
    probe = Probe.of(leaf)
    if probe is not None:
        return probe
    what = repr(leaf[:40]) if isinstance(leaf, str) else f"a {type(leaf).__name__}"
    return Unchecked("no_text", f"{what} holds no word character or number to trace to a source")


def probes(value: object) -> Iterator[Probe | Unchecked]:
    """The scalars of an argument value (strings and numbers; the keys of its mappings too) as probes, in order;
    :class:`Unchecked` for each one the matcher cannot check, and as the last item when the value is over the
    walk's bounds (its other values are not looked at: the value as a whole is unchecked). ``None`` is an
    absent value (nothing to check)."""
    budget = MAX_LEAVES
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            yield Unchecked("too_large", f"more than {MAX_LEAVES} values")
            return
        if isinstance(item, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                yield Unchecked("too_deep", f"nested deeper than {MAX_DEPTH} levels")
                return
            children = [part for pair in item.items() for part in pair] if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in reversed(children))
        elif item is not None:
            yield _probe_or_unchecked(item)


@dataclass(frozen=True, slots=True)
class Probe:
    """One scalar of an argument in the matcher's normal forms (built once, compared with every fragment)."""

    numbers: frozenset[Decimal]
    words: str
    compact: str

    @classmethod
    def of(cls, leaf: object) -> Probe | None:
        """``leaf``'s probe; ``None`` when it carries nothing to trace (a text without a word character or a
        number, a bool, an object of another type). A value that is a number is matched as a number only."""
        if isinstance(leaf, bool) or not isinstance(leaf, str | int | float | Decimal):
            return None
        numbers = as_numbers(leaf)
        if not isinstance(leaf, str):
            return cls(numbers, "", "") if numbers else None
        if numbers:  # a number, but a long run of plain digits is an identifier too, matched compact ("123 456")
            digits = leaf.strip(_CURRENCY)
            return cls(
                numbers, "", digits if len(digits) >= MIN_COMPACT and digits.isascii() and digits.isdigit() else ""
            )
        normal = words(leaf)
        if not normal:
            return None
        compact = normal.replace(" ", "")
        return cls(numbers, f" {normal} ", compact if len(compact) >= MIN_COMPACT else "")

    def found_in(self, fragment: Fragment) -> bool:
        """Could this value have been read from ``fragment``?"""
        if self.numbers and not self.numbers.isdisjoint(fragment.numbers):
            return True
        if self.words and self.words in fragment.words:
            return True
        return bool(self.compact) and self.compact in fragment.compact
