"""The rules layer of the support router: signal phrases with the spec's priority, tolerant of small typos.

The spec's signal words (customer, ticket, issue, status, account, id, city / how do I, help, policy, guide,
explain, support / weather, temperature, price, crypto, bitcoin) are too loose as bare words — "Explain ticket
escalation" holds "ticket" and is a help question, "Can you help me?" holds "help" and is conversation — so this
layer only fires on *phrases* that settle a route on their own:

* POSTGRES — a reference to a record: ``ticket 12``, ``customer #3``, ``open tickets``, ``status of ticket``,
  ``which customer``, ``customers in London``, a person's tickets (``Jane's tickets``).
* VECTOR — a help topic or a how-to: password reset, refund, escalation, policy, FAQ, ``how do I``.
* EXTERNAL — weather words and coin names, market prices, world facts.
* LLM — talk about the assistant itself, greetings and thanks, a bare "can you help me?" with no topic.

When phrases of several routes match, the spec's priority decides (POSTGRES, VECTOR, EXTERNAL, LLM), except that
a question about the assistant itself ("how does this system work") is LLM unless it names a record. When no
phrase matches, the rules abstain and the embedding layer decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from routegate.apps.support.contracts import ROUTES, SupportRoute

VOCABULARY: Final = (
    "ticket",
    "tickets",
    "customer",
    "customers",
    "status",
    "password",
    "refund",
    "refunds",
    "policy",
    "escalation",
    "escalated",
    "weather",
    "temperature",
    "bitcoin",
    "explain",
    "system",
    "account",
    "forecast",
    "reset",
    "price",
)
"""Words whose misspellings are worth correcting before matching (edit distance 1, or 2 for long words)."""
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


def correct_typos(text: str, vocabulary: Sequence[str] = VOCABULARY) -> str:
    """Lower-case ``text`` and replace near-misses of the ``vocabulary`` (the router's key words by default:
    ``tikcet`` → ``ticket``); the first word of the vocabulary near a token wins."""
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


_ID = r"\s*(?:#|no\.?|number|id|nr\.?)?\s*#?\d+\b"
PATTERNS: Final[Mapping[SupportRoute, Sequence[tuple[str, str]]]] = {
    "POSTGRES": (
        ("record id", rf"\b(?:tickets?|issues?|customers?|accounts?){_ID}"),
        ("customer id", r"\bcustomer id\b"),
        ("status of a record", r"\bstatus of (?:my |the |his |her |their )?(?:ticket|issue|account|order)"),
        (
            "ticket state",
            r"\b(?:open|opened|closed|pending|resolved|unresolved|all|my|any|list|show|count)\s+tickets?\b",
        ),
        ("tickets of someone", r"\btickets?\s+(?:for|of|from|by|belong|opened|filed|does|did)\b"),
        ("someone's tickets", r"\b[a-z]+'s\s+tickets?\b"),
        ("which customer", r"\b(?:which|what|who|whose|find|list|show|all|the|our|every|many)\s+customers?\b"),
        ("customers and cities", r"\bcustomers?\s+(?:in|from|named|called|with|and)\b"),
        ("customer's city", r"\b(?:city|cities|located|live[sd]?)\b.*\b(?:customers?|[a-z]+ (?:doe|smith|brown))\b"),
        ("where someone lives", r"\b(?:which city|what city|where)\b.*\b(?:live|lives|located|from|in)\b"),
        ("who lives", r"\bwho (?:lives|is) (?:in|from)\b"),
        ("who reported", r"\bwho (?:reported|opened|filed|raised)\b"),
        ("account details", r"\baccount (?:info|information|details|status)\b"),
        ("tickets with customers", r"\btickets? (?:with|and) (?:their |the )?customers?\b"),
    ),
    "VECTOR": (
        ("password topic", r"\bpassword\b"),
        ("refund topic", r"\b(?:refunds?|refunded|money back)\b"),
        ("escalation topic", r"\bescalat\w*"),
        ("policy", r"\b(?:policy|policies)\b"),
        ("faq or guide", r"\b(?:faqs?|guide|help articles?|documentation|docs|knowledge base)\b"),
        ("how-to", r"\bhow (?:do|can|should|would) (?:i|we|you|one)\b(?! (?:decide|work|choose|route))"),
        ("how to", r"\bhow to\b"),
        ("support process", r"\b(?:support hours|contact support|two-factor|2fa|cancel (?:my )?subscription)\b"),
        ("account how-to", r"\b(?:delete|close|update|change) (?:my|the) (?:account|email|username|password)\b"),
    ),
    "EXTERNAL": (
        ("weather", r"\b(?:weather|temperature|forecast|rain|raining|snow|sunny|humidity|umbrella|hot|cold)\b"),
        ("crypto", r"\b(?:bitcoin|btc|crypto\w*|ethereum|eth|dogecoin|doge|coin)\b"),
        ("market price", r"\b(?:price of|stock price|exchange rate|share price|how much is \w+ worth)\b"),
        ("world facts", r"\b(?:capital of|population of|news|headlines|what time is it in|how tall|who won)\b"),
    ),
    "LLM": (
        ("about the assistant", r"\b(?:this (?:system|assistant|bot|chat)|are you|who are you|your name|yourself)\b"),
        ("capabilities", r"\b(?:what can you do|your capabilities|what (?:kind of )?questions can i ask)\b"),
        ("how the assistant works", r"\bhow (?:do|does) you\b|\bhow you work\b|\bwhich tools\b"),
        ("greeting", r"^(?:hi|hello|hey|good (?:morning|afternoon|evening)|helo)\b"),
        # the whole message is a request for help with no topic ("Can you help me?"): the answer is a question
        # back, so no embedding (or LLM router call) is needed to decide it
        (
            "bare request for help",
            r"^(?:(?:can|could|would|will) (?:you|u) (?:please )?|please )?(?:help|assist)(?: me| us)?"
            r"(?: (?:please|out))?\s*[?.!]*$",
        ),
        ("thanks or goodbye", r"\b(?:thanks?|thank you|thnks|bye|goodbye)\b"),
        ("conversation", r"\b(?:tell me a joke|write me|summarize our conversation|start over|never mind)\b"),
    ),
}
"""Each route's signal phrases, ``(name, regular expression)``, matched against the typo-corrected, lower-cased
message (the built-in desk's configuration carries the same phrases: ``apps/configured/builtin/desk.toml``)."""
_COMPILED: Final = {
    route: tuple((name, re.compile(pattern)) for name, pattern in patterns) for route, patterns in PATTERNS.items()
}


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
ABOUT: Final = ("about the assistant", "capabilities", "how the assistant works")
"""The LLM phrases that make a message a question about the assistant itself (LLM unless it names a record)."""


def _normalized(text: str) -> str:
    return correct_typos(" ".join(text.split()))  # runs of whitespace do not break a phrase


class SupportRules:
    """The deterministic first layer of the support router (a rule stage of the cascade:
    :class:`routegate.routers.cascade.RuleStage`).

    ``patterns``: each route's signal phrases (the built-in desk's by default); ``normalize``: the text a message
    is matched as; ``about``: the LLM phrases that make a message a question about the assistant itself (LLM
    unless it names a record). A configured desk's rules are these with its own phrases
    (:class:`~routegate.apps.configured.rules.DeskRules`)."""

    name = "rules"

    def __init__(
        self,
        patterns: Patterns = _COMPILED,
        *,
        normalize: Callable[[str], str] = _normalized,
        about: Collection[str] = ABOUT,
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


BUILT_IN_RULES: Final = SupportRules()
"""The built-in desk's rules, one instance (and one cache of verdicts) for the router and the follow-up reader."""


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
