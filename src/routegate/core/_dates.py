"""Dates and times in a text, for the provenance matcher.

A number is matched as a number *in context*: the ``13`` of ``"June 13"`` or of ``"2024-06-13"`` is a day, the
``13`` of ``"13:00"`` an hour — none of them is the number 13, so a source that holds only those does not vouch for
an argument ``13``. And a date is a date however it is written: the argument ``"2025-01-11"`` matches a request
that says ``"January 11th, 2025"`` or ``"11 January"``.

Recognised, case-insensitively: ISO dates (``2025-01-11``, also before ``T10:00``), a month's name or its
abbreviation with a day (``Jan 11``, ``January 11th, 2025``, ``11 January 2025``, ``the 11th of January``) and an
optional year after it; times ``19:00``, ``7:30 pm``, ``7pm``. Dates written with slashes (``11/01/2025``) are not
read as dates: which number is the day is a guess (their numbers stay numbers). A date without a year matches a
date of any year with the same month and day.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

Day = tuple[int | None, int, int]
"""A date: its year (``None`` when the text gave none), month and day."""
Clock = tuple[int, int]
"""A time of day: hour (0-23) and minute."""

_MONTHS: Final = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s*(?P<{}>\d{{4}})(?!\d))?"
_WHEN = re.compile(
    rf"(?<![\w-])(?P<iy>\d{{4}})-(?P<im>\d{{1,2}})-(?P<id>\d{{1,2}})(?![\d-])"
    rf"|\b(?P<m1>{_MONTH})\.?\s+(?:the\s+)?(?P<d1>\d{{1,2}}){_ORDINAL}(?!\w){_YEAR.format('y1')}"
    rf"|(?<![\w.,])(?:the\s+)?(?P<d2>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?(?P<m2>{_MONTH})\b\.?{_YEAR.format('y2')}"
    r"|(?<![\d:.,])(?P<h>\d{1,2}):(?P<mi>\d{2})(?::\d{2}(?:\.\d+)?)?(?:\s*(?P<ap>[ap])\.?m\b\.?)?(?![\d:])"
    r"|(?<![\w:.,])(?P<h2>\d{1,2})\s*(?P<ap2>[ap])\.?m\b\.?",
    re.IGNORECASE,
)
_WHOLE_DATETIME = re.compile(
    r"\s*(?P<date>\d{4}-\d{1,2}-\d{1,2})(?:[T ](?P<time>\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(?:Z|[+-]\d{2}:?\d{2})?)?\s*"
)


def _day(year: str | None, month: int, day: str) -> Day | None:
    """The date, when it is one (``2025-02-30`` is not; a day without a year needs only be 1 to 31)."""
    number = int(day)
    if year is None:
        return (None, month, number) if 1 <= month <= 12 and 1 <= number <= 31 else None
    try:
        dt.date(int(year), month, number)
    except ValueError:
        return None
    return int(year), month, number


def _clock(hour: str, minute: str, meridiem: str | None) -> Clock | None:
    h, m = int(hour), int(minute)
    if meridiem:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if meridiem.lower() == "p" else 0)
    return (h, m) if h <= 23 and m <= 59 else None


class When:
    """The dates and times a text holds, and where they are (their numbers are not numbers of their own)."""

    __slots__ = ("dates", "spans", "times")

    def __init__(self, text: str) -> None:
        dates: set[Day] = set()
        times: set[Clock] = set()
        spans: list[tuple[int, int]] = []
        for found in _WHEN.finditer(text):
            date, time = _read(found)
            if date is not None:
                dates.add(date)
            elif time is not None:
                times.add(time)
            else:
                continue
            spans.append(found.span())
        self.dates = frozenset(dates)
        self.times = frozenset(times)
        self.spans = tuple(spans)

    def covers(self, start: int, end: int) -> bool:
        """Is the text between ``start`` and ``end`` part of a date or a time?"""
        return any(left <= start and end <= right for left, right in self.spans)


def _read(found: re.Match[str]) -> tuple[Day | None, Clock | None]:
    """The date or the time one match of the pattern names (neither when its numbers are out of range)."""
    group = found.group
    if group("iy") is not None:
        return _day(group("iy"), int(group("im")), group("id")), None
    if group("m1") is not None:
        return _day(group("y1"), _MONTHS[group("m1").lower()], group("d1")), None
    if group("m2") is not None:
        return _day(group("y2"), _MONTHS[group("m2").lower()], group("d2")), None
    if group("h") is not None:
        return None, _clock(group("h"), group("mi"), group("ap"))
    return None, _clock(group("h2"), "0", group("ap2"))


def when_of(text: str) -> tuple[frozenset[Day], frozenset[Clock]] | None:
    """The date (and time) a whole value is, when it is nothing else (``"2025-01-11"``, ``"2025-01-11T19:00"``,
    ``"January 11th, 2025"``, ``"19:00"``); ``None`` for any other text."""
    if len(text) > 64 or not any(ch.isdigit() for ch in text):
        return None
    whole = _WHOLE_DATETIME.fullmatch(text)
    if whole is not None:
        year, month, day = whole["date"].split("-")
        date = _day(year, int(month), day)
        if date is None:
            return None
        clock = whole["time"]
        if clock is None:
            return frozenset({date}), frozenset()
        hour, minute = clock.split(":")[:2]
        time = _clock(hour, minute, None)
        return (frozenset({date}), frozenset({time})) if time is not None else None
    found = _WHEN.fullmatch(text.strip())
    if found is None:
        return None
    date, time = _read(found)
    if date is not None:
        return frozenset({date}), frozenset()
    return None if time is None else (frozenset(), frozenset({time}))


def same_day(wanted: Day, found: Day) -> bool:
    """Could ``found`` be the date ``wanted`` (a date without a year is any year's)?"""
    return wanted[1:] == found[1:] and (wanted[0] is None or found[0] is None or wanted[0] == found[0])
