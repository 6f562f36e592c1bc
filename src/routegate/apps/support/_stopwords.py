"""The words of a question that never name a record, for the offline readers that look for a name or a value in
it (the built-in desk's SQL templates, a configured desk's planner and its example questions)."""

from __future__ import annotations

from typing import Final

FUNCTION_WORDS: Final = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "my",
        "not",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
"""Articles, pronouns, question words, the commonest verbs and "not"."""

REQUEST_WORDS: Final = FUNCTION_WORDS | frozenset(
    [
        "all",
        "any",
        "customer",
        "details",
        "did",
        "each",
        "every",
        "find",
        "get",
        "give",
        "has",
        "have",
        "he",
        "her",
        "his",
        "info",
        "its",
        "list",
        "look",
        "many",
        "me",
        "name",
        "named",
        "please",
        "pls",
        "she",
        "show",
        "still",
        "tell",
        "their",
        "them",
        "they",
        "up",
        "whose",
        "would",
    ]
)
""":data:`FUNCTION_WORDS` and the words a request for records is made of (``show``, ``find``, ``details``...)."""
