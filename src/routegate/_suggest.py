"""Did you mean: the name a user most likely meant, for the error that refuses the one they wrote.

Every "did you mean" of routegate (a command's flag, a desk directory, a table, a column, a field of
``desk.toml``) comes from :func:`close_ones`, :func:`difflib.get_close_matches` with its default cut-off, so that they
all suggest alike and a name far from every known one gets no suggestion.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches


def close_ones(given: str, known: Iterable[str], *, n: int = 3) -> list[str]:
    """The ``n`` of ``known`` closest to ``given`` (and close enough to be a typo of it), closest first."""
    return get_close_matches(given, [name for name in dict.fromkeys(known) if name != given], n=n)


def closest(given: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` closest to ``given`` (and close enough to be a typo of it), else ``None``."""
    matches = close_ones(given, known, n=1)
    return matches[0] if matches else None


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`` (did you mean 'email'?)`` for a close one of ``known``, else ``""``: appended to the error's message."""
    match = closest(given, known)
    return f" (did you mean {match!r}?)" if match is not None else ""
