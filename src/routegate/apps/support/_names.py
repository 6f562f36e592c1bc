"""The names a message gives a customer by (``"Show tickets for customer John"`` → ``["John"]``), for the follow-up
reader (:mod:`.followup`): a message that names its own customer is not read against the conversation.

Capitalised words not opening the sentence, and the word after ``customer`` / ``named`` / ``for``…, with the
built-in desk's key words' misspellings corrected first (its ``[router] typo_words``).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Final

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support._stopwords import REQUEST_WORDS
from routegate.apps.support.rules import correct_typos

_NAME_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_NAME_INTRO: Final = frozenset({"customer", "named", "called", "for", "of", "by", "does", "did", "has", "is", "find"})
_STOP: Final = REQUEST_WORDS | frozenset(
    [
        "account",
        "accounts",
        "been",
        "belong",
        "belongs",
        "check",
        "cities",
        "city",
        "closed",
        "count",
        "customers",
        "detail",
        "filed",
        "hers",
        "herself",
        "him",
        "himself",
        "id",
        "information",
        "issue",
        "issues",
        "live",
        "lives",
        "located",
        "names",
        "now",
        "number",
        "open",
        "opened",
        "problem",
        "pull",
        "reported",
        "right",
        "status",
        "theirs",
        "themselves",
        "there",
        "ticket",
        "tickets",
        "was",
        "were",
    ]
)
_PLACES: Final = frozenset({"london", "toronto", "new", "york", "paris", "berlin"})


@cache
def builtin_vocabulary() -> tuple[str, ...]:
    """The built-in desk's key words whose misspellings are corrected (its ``[router] typo_words``)."""
    return tuple(word.lower() for word in builtin_config().router.typo_words)


def named_customers(text: str) -> list[str]:
    """The names a message gives a customer by: capitalised words not opening the sentence, and the word after
    "customer" / "named" / "for"…"""
    vocabulary = builtin_vocabulary()
    words = _NAME_WORD.findall(text)
    names: list[str] = []
    run: list[str] = []
    for index, word in enumerate(words):
        bare = word.removesuffix("'s").removesuffix("’s")
        lower = correct_typos(bare, vocabulary)
        capitalised = bare[:1].isupper()
        introduced = index > 0 and correct_typos(words[index - 1], vocabulary) in _NAME_INTRO
        if lower not in _STOP and lower not in _PLACES and len(bare) >= 3 and (capitalised or introduced):
            run.append(bare)
            continue
        if run:
            names.append(" ".join(run))
            run = []
    if run:
        names.append(" ".join(run))
    return names
