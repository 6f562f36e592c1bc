"""Words for tables and columns: the singular and plural a question uses (``orders`` → ``order``), and the column
people name a row by (``name``, ``title``)."""

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
