"""The rules layer of a configured desk's router, generated from its configuration: phrases that settle a route on
their own, with the built-in desk's priority (POSTGRES, VECTOR, EXTERNAL, LLM; a question about the assistant
itself stays LLM unless it names a record).

* POSTGRES — a record reference built from the tables' words: ``order 1042``, ``how many orders``,
  ``list shipped orders``, ``orders for``, ``Maria's orders``, ``who placed``.
* VECTOR — the knowledge route's keywords (its documents' topics) and how-to phrasing.
* EXTERNAL — each tool route's keywords.
* LLM — greetings, thanks, questions about the assistant.

Every route's own ``keywords`` from ``desk.toml`` count for its kind. No phrase → the rules abstain and the
embedding layer decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from routegate.apps.configured.config import DeskConfig
from routegate.apps.support.contracts import ROUTES, SupportRoute
from routegate.apps.support.rules import SupportRules, correct_typos

KIND_ROUTE: Final[Mapping[str, SupportRoute]] = {"sql": "POSTGRES", "kb": "VECTOR", "tool": "EXTERNAL", "llm": "LLM"}
_ABOUT: Final = ("about the assistant", "capabilities")
_LLM: Final = (
    ("about the assistant", r"\b(?:this (?:system|assistant|bot|chat)|are you|who are you|your name|yourself)\b"),
    ("capabilities", r"\b(?:what can you do|your capabilities|how (?:do|does) you work|what (?:kind of )?questions)\b"),
    ("greeting", r"^(?:hi|hello|hey|good (?:morning|afternoon|evening))\b"),
    ("thanks or goodbye", r"\b(?:thanks?|thank you|bye|goodbye)\b"),
    ("bare request for help", r"^(?:(?:can|could) you )?(?:help|assist)(?: me)?(?: please)?\s*[?.!]*$"),
)
_HOW_TO: Final = (
    ("how-to", r"\bhow (?:do|can|should|would|long|much time) (?:i|we|you|one|it|does|do)\b"),
    ("how to", r"\bhow to\b"),
    ("can I", r"\b(?:can|may) i\b"),
    ("policy", r"\b(?:policy|policies|faqs?|guide|terms)\b"),
)


def _alternatives(words: Sequence[str]) -> str:
    return "|".join(re.escape(w.lower()) for w in sorted(set(words), key=len, reverse=True) if w.strip())


def compile_patterns(config: DeskConfig) -> dict[SupportRoute, tuple[tuple[str, re.Pattern[str]], ...]]:
    """The rules' phrases per route, from the configuration: the generated ones (unless ``[router]
    generated_rules = false``), then each route's own ``rules``."""
    out = _generated(config) if config.router.generated_rules else {route: [] for route in ROUTES}
    for route in config.routes:
        out[KIND_ROUTE[route.kind]] += [(rule.name, rule.pattern) for rule in route.rules]
    return {route: tuple((name, re.compile(p)) for name, p in patterns) for route, patterns in out.items()}


def _generated(config: DeskConfig) -> dict[SupportRoute, list[tuple[str, str]]]:
    labels = [t.label for t in config.tables] + [a for t in config.tables for a in t.aliases]
    plurals = [t.plural for t in config.tables]
    values = [v for t in config.tables for vs in t.filters.values() for v in vs]
    words = _alternatives(labels + plurals)
    many = _alternatives(plurals)
    out: dict[SupportRoute, list[tuple[str, str]]] = {route: [] for route in ROUTES}
    if words:
        out["POSTGRES"] += [
            ("record id", rf"\b(?:{words})\s*(?:#|no\.?|number|id|nr\.?)?\s*#?\d+\b"),
            ("records of someone", rf"\b(?:{words})\s+(?:for|of|by|from|belonging|placed|named|called)\b"),
            ("someone's records", rf"\b[a-z]+'s\s+(?:{words})\b"),
            ("who placed", r"\bwho (?:placed|ordered|bought|made|owns)\b"),
        ]
    if many:
        out["POSTGRES"].append(
            (
                "records asked for",
                rf"\b(?:how many|count|number of|list|show|all|which|every|any)\s+(?:\w+\s+)?(?:{many})\b",
            )
        )
    columns = [
        c.replace("_", " ") for t in config.tables for c in t.columns if c != t.primary_key and not c.endswith("_id")
    ]
    if columns:
        # a follow-up about a row named earlier: "and which city is she from?", "what is its status?"
        out["POSTGRES"].append(
            (
                "a column of someone named earlier",
                rf"\b(?:{_alternatives(columns)})\b.*\b(?:he|she|they|it|his|her|their|its)\b"
                rf"|\b(?:he|she|they|it|his|her|their|its)\b.*\b(?:{_alternatives(columns)})\b",
            )
        )
    if values and words:
        out["POSTGRES"].append(("a filter value", rf"\b(?:{_alternatives(values)})\s+(?:{words})\b"))
    out["VECTOR"] += list(_HOW_TO)
    out["LLM"] += list(_LLM)
    for route in config.routes:
        subject = [*route.keywords, *route.not_covered]  # what a tool does not cover is still its subject
        if subject and route.kind != "sql":
            out[KIND_ROUTE[route.kind]].append((f"{route.name} keyword", rf"\b(?:{_alternatives(subject)})\b"))
    return out


class DeskRules(SupportRules):
    """The rule stage of a configured desk's router (the built-in desk's rule stage, with generated phrases)."""

    def __init__(self, config: DeskConfig) -> None:
        about = [rule.name for route in config.routes for rule in route.rules if rule.about]
        if config.router.generated_rules:
            about += _ABOUT
        vocabulary = tuple(word.lower() for word in config.router.typo_words)

        def normalized(text: str) -> str:
            spaced = " ".join(text.lower().replace("’", "'").split())
            return correct_typos(spaced, vocabulary) if vocabulary else spaced

        super().__init__(compile_patterns(config), normalize=normalized, about=frozenset(about))
