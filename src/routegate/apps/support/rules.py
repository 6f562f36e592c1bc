"""The rules layer of the desk's router: signal phrases that settle a route on their own, with the spec's priority,
tolerant of small typos.

A desk's phrases come from its configuration (:func:`compile_patterns`): each route's own ``rules`` in
``desk.toml`` and, unless ``[router] generated_rules = false``, phrases generated from its tables, documents and
tools. The built-in desk's are its configuration's (``apps/configured/builtin/desk.toml``): phrases, not bare
words, because the spec's signal words (customer, ticket, issue, status, account, id, city / how do I, help,
policy, guide, explain, support / weather, temperature, price, crypto, bitcoin) are too loose as bare words —
"Explain ticket escalation" holds "ticket" and is a help question, "Can you help me?" holds "help" and is
conversation.

When phrases of several routes match, the spec's priority decides (POSTGRES, VECTOR, EXTERNAL, LLM), except that
a question about the assistant itself ("how does this system work") is LLM unless it names a record. When no
phrase matches, the rules abstain and the embedding layer decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from routegate.apps.configured.routes import KIND_ROUTE
from routegate.apps.support.contracts import ROUTES, SupportRoute

if TYPE_CHECKING:
    from routegate.apps.configured.config import DeskConfig

_WORD = re.compile(r"[a-z0-9]+|[^a-z0-9]+")


def _within_one_edit(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance <= 1 (one insertion, deletion, substitution or adjacent swap)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diffs = [i for i in range(la) if a[i] != b[i]]
        if len(diffs) == 1:
            return True
        i = diffs[0]
        return len(diffs) == 2 and diffs[1] == i + 1 and a[i] == b[i + 1] and a[i + 1] == b[i]
    short, long_ = (a, b) if la < lb else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1 :]


def _within_two_edits(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 2:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
        if min(current) > 2:
            return False
        previous = current
    return previous[-1] <= 2


def correct_typos(text: str, vocabulary: Sequence[str]) -> str:
    """Lower-case ``text`` and replace near-misses (edit distance 1, or 2 for long words) of the ``vocabulary``
    (a desk's ``[router] typo_words``: ``tikcet`` → ``ticket``); the first word of the vocabulary near a token
    wins."""
    out: list[str] = []
    known = frozenset(vocabulary)
    for token in _WORD.findall(text.lower()):
        if len(token) >= 5 and token.isalpha() and token not in known:
            for word in vocabulary:
                if _within_one_edit(token, word) or (len(token) >= 8 and _within_two_edits(token, word)):
                    token = word
                    break
        out.append(token)
    return "".join(out)


@dataclass(frozen=True, slots=True)
class RuleVerdict:
    """What the rules found: the phrases matched per route, and the route they settle (``None`` = abstain)."""

    route: SupportRoute | None
    hits: Mapping[SupportRoute, tuple[str, ...]]
    why: str

    @property
    def scores(self) -> dict[str, float]:
        return {route: float(len(self.hits.get(route, ()))) for route in ROUTES}


Patterns = Mapping[SupportRoute, tuple[tuple[str, re.Pattern[str]], ...]]
"""Each route's signal phrases: ``(name, compiled pattern)`` pairs."""


def _spaced(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())  # runs of whitespace do not break a phrase


class SupportRules:
    """The deterministic first layer of the desk's router (a rule stage of the cascade:
    :class:`routegate.routers.cascade.RuleStage`).

    ``patterns``: each route's signal phrases; ``normalize``: the text a message is matched as (by default its
    runs of whitespace collapsed and lower-cased); ``about``: the LLM phrases that make a message a question about
    the assistant itself (LLM unless it names a record). :meth:`of` builds a desk's from its configuration."""

    name = "rules"

    def __init__(
        self,
        patterns: Patterns,
        *,
        normalize: Callable[[str], str] = _spaced,
        about: Collection[str] = (),
    ) -> None:
        @lru_cache(maxsize=256)
        def match(text: str) -> RuleVerdict:
            return _verdict(normalize(text), patterns, about)

        self._match = match

    def match(self, text: str) -> RuleVerdict:
        """The rules' verdict on ``text``. A pure function of the text: the last few verdicts are kept, so the
        desk's prefetch and the router's rule stage match a message once."""
        return self._match(text)

    def settle(self, text: str, allowed: Collection[str] | None) -> RuleVerdict:
        verdict = self._match(text)
        if verdict.route is not None and allowed is not None and verdict.route not in allowed:
            return RuleVerdict(None, verdict.hits, f"{verdict.why}; {verdict.route} is not allowed here")
        return verdict

    @classmethod
    def of(cls, config: DeskConfig) -> SupportRules:
        """A desk's rules: its phrases (:func:`compile_patterns`), matched on the message lower-cased, its runs of
        whitespace collapsed and the misspellings of its ``[router] typo_words`` corrected; its ``about`` phrases
        (and, with generated rules, the generated ones about the assistant) make a message a question about the
        assistant."""
        about = [rule.name for route in config.routes for rule in route.rules if rule.about]
        if config.router.generated_rules:
            about += _ABOUT
        vocabulary = tuple(word.lower() for word in config.router.typo_words)

        def normalized(text: str) -> str:
            spaced = _spaced(text)
            return correct_typos(spaced, vocabulary) if vocabulary else spaced

        return cls(compile_patterns(config), normalize=normalized, about=frozenset(about))


def _verdict(text: str, patterns: Patterns, about: Collection[str]) -> RuleVerdict:
    hits: dict[SupportRoute, tuple[str, ...]] = {}
    for route, compiled in patterns.items():
        found = tuple(name for name, pattern in compiled if pattern.search(text))
        if found:
            hits[route] = found
    if not hits:
        return RuleVerdict(None, hits, "no signal phrase matched")
    if "LLM" in hits and "POSTGRES" not in hits and any(name in about for name in hits["LLM"]):
        return RuleVerdict("LLM", hits, f"a question about the assistant itself ({', '.join(hits['LLM'])})")
    route = next(r for r in ROUTES if r in hits)
    others = [r for r in hits if r != route]
    why = f"{route} phrase(s): {', '.join(hits[route])}"
    if others:
        why += f"; priority over {', '.join(others)}"
    return RuleVerdict(route, hits, why)


# -- a desk's phrases, from its configuration ------------------------------------------------------------

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
