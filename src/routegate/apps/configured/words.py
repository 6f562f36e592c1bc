"""Words for tables and columns: the singular and plural a question uses (``orders`` → ``order``), the column
people name a row by (``name``, ``title``), the columns that only link rows (ids), and a column's value said as a
person says it (``ordered on 2026-11-20``, ``status is open``)."""

from __future__ import annotations

import re
from typing import Final

_NAME_COLUMNS: Final = ("name", "full_name", "title", "product_name", "display_name", "username", "label")
_PRIVATE: Final = re.compile(r"(password|passwd|secret|token|hash|salt|ssn|api_key|apikey|card_number|iban|cvv)")


def singular(word: str) -> str:
    """``orders`` → ``order``, ``categories`` → ``category``, ``addresses`` → ``address``, ``order_items`` →
    ``order item``."""
    parts = word.lower().split("_")
    last = parts[-1]
    if last.endswith("ies") and len(last) > 4:
        last = last[:-3] + "y"
    elif last.endswith(("sses", "xes", "ches", "shes")):
        last = last[:-2]
    elif last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join([*parts[:-1], last])


def plural(label: str) -> str:
    """``order`` → ``orders``, ``category`` → ``categories``, ``address`` → ``addresses``."""
    if label.endswith("y") and label[-2:-1] not in "aeiou":
        return label[:-1] + "ies"
    if label.endswith(("s", "x", "ch", "sh")):
        return label + "es"
    return label + "s"


def name_column(columns: list[tuple[str, str]]) -> str | None:
    """The column a row is named by: ``name``, ``title``, ..., else the first text column ending in ``name``."""
    text = [c for c, kind in columns if kind in ("text", "character varying", "citext")]
    for preferred in _NAME_COLUMNS:
        if preferred in text:
            return preferred
    return next((c for c in text if c.endswith(("_name", "_title"))), None)


def is_private(column: str) -> bool:
    """Columns left out of the readable list by ``desk init`` unless named with ``--tables`` columns: passwords,
    secrets, tokens, hashes, card numbers."""
    return bool(_PRIVATE.search(column.lower()))


def words_of(identifier: str) -> str:
    """``shipped_at`` → ``shipped at``."""
    return identifier.replace("_", " ")


_PLACES: Final = frozenset(
    {"city", "country", "region", "town", "location", "branch", "site", "area", "province", "county", "district"}
)
_STATES: Final = frozenset({"status", "stage", "phase", "condition"})
_LINKING: Final = frozenset({"on", "at", "in", "by", "for", "from", "to", "until", "since", "with"})


def is_id(column: str) -> bool:
    """A column that only links rows (``id``, ``customer_id``): said in an answer only when asked for."""
    name = column.lower()
    return name == "id" or name.endswith("_id")


def fact(column: str, value: str) -> str:
    """A column's value as a clause: ``status is open``; ``ordered on 2026-11-20`` when the column's name ends
    with a preposition (``ordered_on``, ``shipped_at``)."""
    words = words_of(column)
    if words.split()[-1].lower() in _LINKING:
        return f"{words} {value}"
    return f"{words} is {value}"


def filter_questions(column: str, value: str, many: str, other: str) -> tuple[str, str]:
    """A count and a listing naming a filter's value, worded for what the column holds: a place (``how many
    members are in Istanbul``), a state (``how many orders are open``, ``list closed orders``), anything else
    (``how many products have category clothing``). ``other``: a second value, for the listing."""
    last = column.lower().split("_")[-1]
    if last in _PLACES:
        return f"how many {many} are in {value}", f"list {many} in {other}"
    if last in _STATES:
        return f"how many {many} are {value}", f"list {other} {many}"
    words = words_of(column)
    return f"how many {many} have {words} {value}", f"list {many} with {words} {other}"


def column_question(column: str, subject: str) -> str:
    """A question asking one column of a row: ``what is the status of order 1040``; ``when was order 1040
    ordered`` for a date named by what happened (``ordered_on``, ``shipped_at``)."""
    words = words_of(column).split()
    if len(words) > 1 and words[-1].lower() in ("on", "at") and words[-2].lower().endswith("ed"):
        return f"when was {subject} {' '.join(words[:-1])}"
    return f"what is the {' '.join(words)} of {subject}"
