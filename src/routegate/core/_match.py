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
  format (``"1.000,50"`` and ``"1,000.50"`` are the word ``1000.50``). Numbers are read in context: the numbers
  of a date or a time (``"June 13"``, ``"2026-06-13"``, ``"13:00"``) are not numbers of their own.
* **dates and times** — a value that is a date or a time (``"2025-01-11"``, ``"January 11th, 2025"``,
  ``"19:00"``, a ``datetime``) matches the same date or time written any way the matcher reads
  (:mod:`routegate.core._dates`), and only that.

A structured value (a mapping, a list, a pydantic model, a dataclass) is flattened to its leaves, each with its
full path (``payees[1].iban``, ``shared_with["alice@example.com"]``) and the field it sits under, and a mapping's
keys are leaves too (a model's field names are not: they are its code), so a value is matched to the field it was
read from. An enum is read as its value, a date, a time or a UUID as its text; a value of any other type is not
read, and the source says so (a refusal names it). Every walk is bounded (:data:`MAX_DEPTH`, :data:`MAX_LEAVES`, :data:`MAX_TEXT` per text and
:data:`MAX_SOURCE_TEXT` per source). A source larger than that is cut, which can only make a value *not* match
(fail closed) — a tool's output cannot make the matcher slow. An argument value larger than that, or one with
nothing to trace (no word character or number: ``"../../"``, ``":(){ :|:& };:"``, a blank, a flag, an object of
another type), cannot be checked: :func:`probes` says so (:class:`Unchecked`) instead of skipping it, and a rule
refuses it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
import unicodedata
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from uuid import UUID

from pydantic import BaseModel

from routegate.core._dates import Clock, Day, When, same_day, when_of

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


def numbers_in(text: str, when: When | None = None) -> frozenset[Decimal]:
    """Every number ``text`` holds, each token read once and in context (``"3,000"`` holds 3000 only; the numbers
    of a date or a time — ``"2026-11-25"``, ``"June 13"``, ``"13:00"`` — are not numbers of their own:
    :mod:`routegate.core._dates`); the groups of a token that fits no reading (``"1,2,3"``) are numbers of their
    own. ``when``: the dates and times of the same normalised text, when already read."""
    text = unicodedata.normalize("NFKC", text[:MAX_TEXT])
    spans = (when or When(text)).spans
    found: set[Decimal] = set()
    for match in _NUMBER.finditer(text):
        if spans and any(left <= match.start() and match.end() <= right for left, right in spans):
            continue
        token = match.group()
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
    """One leaf of a source in its normal forms, with where it sits in the source (``path``, ``""`` for the whole),
    the field it was read under (``field``: the key of its value; for a key of a mapping, the field of that
    mapping) and the scalar fields beside it (``record``, when it is a value of a mapping or a model). The numbers, dates and times a text holds are read the first time one is looked for in it."""

    __slots__ = ("_numbers", "_text", "_when", "compact", "field", "path", "record", "words")

    def __init__(
        self, path: str, leaf: str | int | float | Decimal, field: str = "", record: Mapping[str, object] | None = None
    ) -> None:
        self.path = path
        self.field = field
        self.record = record
        self._when: When | None = None
        if isinstance(leaf, str):
            normal = words(leaf)
            self._text: str | None = leaf
            self._numbers: frozenset[Decimal] | None = None
        else:
            normal = words(str(leaf))
            self._text = None
            self._numbers = as_numbers(leaf)
            self._when = _NO_WHEN
        self.words = f" {normal} "
        self.compact = normal.replace(" ", "")

    @property
    def when(self) -> When:
        """The dates and times of the text."""
        found = self._when
        if found is None:
            found = self._when = When(unicodedata.normalize("NFKC", (self._text or "")[:MAX_TEXT]))
        return found

    @property
    def numbers(self) -> frozenset[Decimal]:
        if self._numbers is None:
            self._numbers = numbers_in(self._text or "", self.when)
        return self._numbers

    @property
    def text(self) -> str | None:
        """The text the fragment was read from (``None`` for a number)."""
        return self._text


_NO_WHEN = When("")
_TAIL = re.compile(rf"[\w.,{_SIGNS}]+\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def segment(path: str, key: object) -> str:
    """``path`` extended by a mapping's ``key``: ``.name`` for a name (``payees[1].iban``), else the key in full as
    ``["..."]`` (``shared_with["alice@example.com"]``), or ``[3]`` for a number."""
    if isinstance(key, str):
        if _NAME.fullmatch(key):
            return f"{path}.{key}" if path else key
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    if isinstance(key, int | Decimal) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}[{type(key).__name__}]"


def as_text(leaf: object) -> str | int | float | Decimal | None:
    """A scalar the matcher reads, as it reads it: text and numbers as they are, an enum's value, a date, a time or
    an id as its text (``2025-01-11``); ``None`` for anything else."""
    if isinstance(leaf, str | int | float | Decimal) and not isinstance(leaf, bool):
        return leaf
    if isinstance(leaf, Enum):
        value = leaf.value
        return value if isinstance(value, str | int | float | Decimal) and not isinstance(value, bool) else None
    if isinstance(leaf, dt.date | dt.time):
        return leaf.isoformat()
    if isinstance(leaf, UUID):
        return str(leaf)
    return None


def fields_of(item: object) -> Iterator[tuple[str, object]] | None:
    """The fields of a pydantic model (its extra fields too) or a dataclass instance, by name, as they are (not
    dumped); ``None`` for any other value."""
    if isinstance(item, BaseModel):
        return iter(item)  # the model's own iteration: its fields and extras, values unconverted
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return ((f.name, getattr(item, f.name)) for f in dataclasses.fields(item))
    return None


Record = Mapping[str, object]
"""The named scalar fields of the mapping or model a value sits in (its "row": a message's sender, a payee's
name), as they were when the source was recorded."""
_NO_RECORD: Record = {}


def _record(pairs: Iterable[tuple[object, object]]) -> Record:
    """The scalar fields of one mapping or model, read as the matcher reads them."""
    found: dict[str, object] = {}
    for key, value in pairs:
        if isinstance(key, str):
            leaf = as_text(value)
            if leaf is not None:
                found[key] = leaf
    return found


def fragments(value: object, unread: list[str] | None = None) -> Iterator[Fragment]:
    """The leaves of ``value`` (and the keys of its mappings) as fragments, breadth-first and bounded. A pydantic
    model or a dataclass is read field by field (its field names are its code, not data: they are not leaves); a
    value the matcher cannot read (bytes, an object of another type) is not a leaf, and ``unread`` collects
    ``"<path> (a <type>)"`` for it, so that a refusal can say what was not read. A value of a mapping or model
    carries the scalar fields beside it (:data:`Record`)."""
    budget, text_left = MAX_LEAVES, MAX_SOURCE_TEXT
    queue: deque[tuple[str, str, object, int, Record]] = deque([("", "", value, 0, _NO_RECORD)])
    while queue and budget > 0 and text_left > 0:
        path, field, item, depth, record = queue.popleft()
        if isinstance(item, Mapping):
            if depth >= MAX_DEPTH:
                continue
            row = _record(item.items())
            for key, child in item.items():
                budget -= 1
                where = segment(path, key)
                if isinstance(key, str):
                    text_left -= len(key)
                    yield Fragment(where, key, field)
                queue.append((where, key if isinstance(key, str) else field, child, depth + 1, row))
        elif isinstance(item, list | tuple | set | frozenset):
            if depth >= MAX_DEPTH:
                continue
            for index, child in enumerate(item):
                budget -= 1
                queue.append((f"{path}[{index}]", field, child, depth + 1, _NO_RECORD))
        elif item is None or isinstance(item, bool):
            continue
        elif isinstance(item, str):
            budget -= 1
            cut = min(MAX_TEXT, text_left)
            if len(item) > cut:  # cut where a token ends: "3,000" cut after "3" would hold the number 3
                item = _TAIL.sub("", item[:cut])
            text_left -= len(item)
            yield Fragment(path, item, field, record)
        elif isinstance(item, int | float | Decimal):
            budget -= 1
            yield Fragment(path, item, field, record)
        else:
            named = fields_of(item)
            if named is not None:
                if depth < MAX_DEPTH:
                    pairs = list(named)
                    row = _record(pairs)
                    queue.extend((segment(path, name), name, child, depth + 1, row) for name, child in pairs)
                continue
            leaf = as_text(item)
            if leaf is not None:
                queue.append((path, field, leaf, depth, record))
            elif unread is not None and len(unread) < MAX_UNREAD:
                unread.append(f"{path or 'the whole output'} (a {type(item).__name__})")


MAX_UNREAD = 4
"""Values the matcher could not read, named per source (the first ones found)."""


@dataclass(frozen=True, slots=True)
class Unchecked:
    """Part of an argument value the matcher cannot check, and why: ``too_long`` (a text over :data:`MAX_TEXT`
    characters), ``too_large`` (over :data:`MAX_LEAVES` values), ``too_deep`` (nested deeper than
    :data:`MAX_DEPTH`) or ``no_text`` (nothing to trace: no word character or number)."""

    why: str
    detail: str


def checked_probe(leaf: object) -> Probe | Unchecked:
    """The probe of one scalar of an argument, or why it has none (:class:`Unchecked`)."""
    if isinstance(leaf, str) and len(leaf) > MAX_TEXT:
        return Unchecked("too_long", f"a text of {len(leaf)} characters, over the {MAX_TEXT} the matcher reads")
    probe = Probe.of(leaf)
    if probe is not None:
        return probe
    what = repr(leaf[:40]) if isinstance(leaf, str) else f"a {type(leaf).__name__}"
    return Unchecked("no_text", f"{what} holds no word character or number to trace to a source")


def probes(value: object) -> Iterator[Probe | Unchecked]:
    """The scalars of an argument value (strings and numbers, dates; the keys of its mappings and the fields of a
    model too) as probes, in order; :class:`Unchecked` for each one the matcher cannot check, and as the last item
    when the value is over the walk's bounds (its other values are not looked at: the value as a whole is
    unchecked). ``None`` is an absent value (nothing to check)."""
    for item in leaves(value):
        yield item if isinstance(item, Unchecked) else checked_probe(item)


def leaves(value: object) -> Iterator[object]:
    """The scalars of an argument value, in order (a model's or a dataclass's fields, by value), as the matcher
    reads them; :class:`Unchecked` as the last item when the value is over the walk's bounds."""
    budget = MAX_LEAVES
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            yield Unchecked("too_large", f"more than {MAX_LEAVES} values")
            return
        children: list[object] | None
        if isinstance(item, Mapping):
            children = [part for pair in item.items() for part in pair]
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            named = None if isinstance(item, str) else fields_of(item)
            children = None if named is None else [child for _, child in named]
        if children is not None:
            if depth >= MAX_DEPTH:
                yield Unchecked("too_deep", f"nested deeper than {MAX_DEPTH} levels")
                return
            stack.extend((child, depth + 1) for child in reversed(children))
        elif item is not None:
            leaf = as_text(item)
            yield item if leaf is None else leaf


@dataclass(frozen=True, slots=True)
class Probe:
    """One scalar of an argument in the matcher's normal forms (built once, compared with every fragment)."""

    numbers: frozenset[Decimal]
    words: str
    compact: str
    dates: frozenset[Day] = frozenset()
    times: frozenset[Clock] = frozenset()

    @classmethod
    def of(cls, leaf: object) -> Probe | None:
        """``leaf``'s probe; ``None`` when it carries nothing to trace (a text without a word character or a
        number, a bool, an object of another type). A value that is a number is matched as a number only, one that
        is a date or a time (``"2025-01-11"``, ``"January 11th, 2025"``, ``"19:00"``) as a date or a time only."""
        if not isinstance(leaf, str | int | float | Decimal) or isinstance(leaf, bool):
            text = as_text(leaf)
            if text is None:
                return None
            leaf = text
        numbers = as_numbers(leaf)
        if not isinstance(leaf, str):
            return cls(numbers, "", "") if numbers else None
        if numbers:  # a number, but a long run of plain digits is an identifier too, matched compact ("123 456")
            digits = leaf.strip(_CURRENCY)
            return cls(
                numbers, "", digits if len(digits) >= MIN_COMPACT and digits.isascii() and digits.isdigit() else ""
            )
        when = when_of(leaf)
        if when is not None:
            return cls(frozenset(), "", "", when[0], when[1])
        normal = words(leaf)
        if not normal:
            return None
        compact = normal.replace(" ", "")
        return cls(numbers, f" {normal} ", compact if len(compact) >= MIN_COMPACT else "")

    def found_in(self, fragment: Fragment) -> bool:
        """Could this value have been read from ``fragment``?"""
        if self.dates or self.times:
            when = fragment.when
            return all(any(same_day(day, seen) for seen in when.dates) for day in self.dates) and (
                self.times <= when.times
            )
        if self.numbers and not self.numbers.isdisjoint(fragment.numbers):
            return True
        if self.words and self.words in fragment.words:
            return True
        return bool(self.compact) and self.compact in fragment.compact
