"""A worker's flow rules, and the check of a decision's arguments against the run's sources.

:class:`FlowRules` holds, per argument, the rules a worker declares (:mod:`routegate.core.provenance`): a
:class:`~routegate.core.provenance.From` on its values, a :class:`~routegate.core.provenance.LinksFrom` on the links
inside its text, a :class:`~routegate.core.provenance.NotFrom` on the data that may not flow into it. The governed
step calls :meth:`FlowRules.check` with a decision's arguments before anything runs; the first rule broken is the
refusal, and the evidence — per argument, the origin that decided each value — goes on the trace entry.

What a :class:`~routegate.core.provenance.NotFrom` rule looks for in an argument, beside its whole value: the links
and e-mail addresses of its text, its numbers of five digits or more (a code, an amount with its cents; a year is
not one), its codes (a word of six characters or more mixing letters and digits), and every value of the named
data of six characters or more written whole inside it (a password, an IBAN, a whole message). Each counts as a
leak when the data the rule names holds it and the user's request and the configuration do not.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from routegate.core._dates import When
from routegate.core._match import MAX_TEXT, MIN_COMPACT, Probe, Unchecked, checked_probe, leaves, words
from routegate.core.provenance import (
    MAX_EVIDENCE,
    FlowCheck,
    From,
    LinksFrom,
    NotFrom,
    Origin,
    ProvenanceLedger,
    Refusal,
    link_probes,
)
from routegate.errors import ConfigurationError

_KINDS: tuple[type[From], ...] = (LinksFrom, NotFrom, From)  # the most derived first
_DIGITS = re.compile(r"\d")
_LONG_NUMBER = re.compile(r"(?<![\w.,])\d(?:[.,]?\d|[ \-](?=\d))*(?![\w])")
_GROUPED = re.compile(r"\d[ \-]\d")
_CODE = re.compile(r"\b(?=\w*\d)(?=\w*[^\W\d_])\w{6,}\b")


def _kind(rule: From) -> type[From]:
    return next(kind for kind in _KINDS if isinstance(rule, kind))


class _Placed:
    """The rules of a worker's arguments, sorted by kind as they are read (a later one replaces an earlier one of
    its kind)."""

    def __init__(self) -> None:
        self.rules: dict[str, From] = {}
        self.links: dict[str, LinksFrom] = {}
        self.keeps: dict[str, NotFrom] = {}

    def add(self, name: str, rule: From) -> None:
        if isinstance(rule, LinksFrom):
            self.links[name] = rule
        elif isinstance(rule, NotFrom):
            self.keeps[name] = rule
        else:
            self.rules[name] = rule


@dataclass(frozen=True, slots=True)
class FlowRules:
    """A worker's flow rules: per argument, the rule on its values (``rules``), on the links of its text
    (``links``) and on the data that may not flow into it (``keeps``); arguments without a rule may come from
    anywhere."""

    rules: Mapping[str, From]
    links: Mapping[str, LinksFrom] = field(default_factory=dict)
    keeps: Mapping[str, NotFrom] = field(default_factory=dict)

    @classmethod
    def of(
        cls, worker: str, model: type[BaseModel], flows: Mapping[str, Any] | None = None, *, open_args: bool = False
    ) -> FlowRules | None:
        """The rules ``model``'s fields declare (``Annotated[..., From(...)]``, ``LinksFrom``, ``NotFrom``),
        overridden kind by kind by ``flows`` (a rule or a tuple of rules per argument); ``None`` when there are none
        (the worker then costs nothing). ``flows`` may name only ``model``'s fields, unless the model accepts other
        keys or ``open_args`` (the worker takes ``**kwargs``)."""
        fields = model.model_fields
        placed = _Placed()
        for name, info in fields.items():
            declared = [meta for meta in info.metadata if isinstance(meta, From)]
            for kind in _KINDS:
                same = [rule for rule in declared if _kind(rule) is kind]
                if len(same) > 1:
                    raise ConfigurationError(
                        f"worker {worker!r}: argument {name!r} has {len(same)} {kind.__name__}() rules"
                    )
                if same:
                    placed.add(name, same[0])
        open_model = open_args or model.model_config.get("extra") == "allow"  # other arguments are accepted too
        for name, given in (flows or {}).items():
            if name not in fields and not (open_model and isinstance(name, str) and name):
                raise ConfigurationError(
                    f"worker {worker!r}: flows names {name!r}, which is not an argument ({sorted(fields)})"
                )
            for rule in given if isinstance(given, tuple | list) else (given,):
                if not isinstance(rule, From):
                    raise ConfigurationError(
                        f"worker {worker!r}: flows[{name!r}] must be From(...), LinksFrom(...) or NotFrom(...) (or a "
                        f"tuple of them), got {type(rule).__name__}"
                    )
                placed.add(name, rule)
        if not (placed.rules or placed.links or placed.keeps):
            return None
        return cls(placed.rules, placed.links, placed.keeps)

    def check(self, args: Mapping[str, Any], ledger: ProvenanceLedger) -> FlowCheck:
        """Match every argument's values to their origins; the first argument whose rule a value breaks is the
        refusal. Under a rule, a value the matcher cannot check (:class:`~routegate.core._match.Unchecked`) breaks
        it: it is refused, never passed (a text with nothing to trace breaks only a :class:`From` rule: it carries
        no link and no data). An argument without a rule keeps the origins found as evidence."""
        evidence: dict[str, tuple[str, ...]] = {}
        refusal: Refusal | None = None
        links, keeps = self.links, self.keeps
        for name, value in args.items():
            rule = self.rules.get(name)
            if rule is not None and rule.anywhere:
                rule = None  # anything passes; the origins are still evidence
            link_rule = links.get(name) if links else None
            keep = keeps.get(name) if keeps else None
            seen: dict[str, None] = {}
            refused: Refusal | None = None
            for leaf in leaves(value):
                if refused is not None:
                    break
                probe = leaf if isinstance(leaf, Unchecked) else checked_probe(leaf)
                if isinstance(probe, Unchecked):
                    guard = rule if rule is not None or probe.why == "no_text" else link_rule or keep
                    if guard is not None:
                        refused = Refusal(name, guard, (), probe)
                    continue
                found = ledger.origins_of(probe)
                if rule is None:
                    for origin in found[:MAX_EVIDENCE]:
                        seen.setdefault(str(origin))
                else:
                    deciding = _deciding(rule, found, ledger)
                    if deciding is None:
                        refused = Refusal(name, rule, _named(found), unread=ledger.unread)
                        continue
                    seen.setdefault(str(deciding))
                if isinstance(leaf, str) and link_rule is not None:
                    refused = _links(name, leaf, link_rule, ledger, seen)
                if refused is None and keep is not None:
                    refused = _leak(name, leaf, probe, found, keep, ledger)
            if refused is not None:
                evidence[name] = refused.found
                if refusal is None:
                    refusal = refused
            else:
                evidence[name] = tuple(seen)[:MAX_EVIDENCE]
        return FlowCheck(evidence, refusal)


def _deciding(rule: From, found: Iterable[Origin], ledger: ProvenanceLedger) -> Origin | None:
    """The origin that lets a value through ``rule``: the first it allows, in the order the run recorded them (the
    user's request first)."""
    return next((origin for origin in found if rule.allows(origin, ledger)), None)


def _named(found: tuple[Origin, ...]) -> tuple[str, ...]:
    return tuple(str(origin) for origin in found[:MAX_EVIDENCE])


def _links(name: str, text: str, rule: LinksFrom, ledger: ProvenanceLedger, seen: dict[str, None]) -> Refusal | None:
    """Every link of ``text`` under ``rule``: the first one no allowed source holds is the refusal."""
    for link, probe in link_probes(text):
        found = ledger.origins_of(probe)
        deciding = _deciding(rule, found, ledger)
        if deciding is None:
            return Refusal(name, rule, _named(found), kind="link", piece=link[:200], unread=ledger.unread)
        seen.setdefault(str(deciding))
    return None


def _leak(
    name: str, leaf: object, probe: Probe, found: tuple[Origin, ...], keep: NotFrom, ledger: ProvenanceLedger
) -> Refusal | None:
    """What of the data ``keep`` names the scalar ``leaf`` (in its normal forms, ``probe``, found at ``found``)
    would carry: its whole value, a link, a number or a code of its text, or a value of that data written whole
    in it; ``None`` when nothing, or only what the user's request or the configuration also holds."""
    kept = [origin for origin in found if keep.allows(origin, ledger)]
    if kept and not ledger.trusted(probe):
        return Refusal(name, keep, _named(tuple(kept)), kind="leak", piece="its whole value")
    if not isinstance(leaf, str):
        return None
    for what, piece in _pieces(leaf):
        kept = [origin for origin in ledger.origins_of(piece) if keep.allows(origin, ledger)]
        if kept and not ledger.trusted(piece):
            return Refusal(name, keep, _named(tuple(kept)), kind="leak", piece=what)
    normal = f" {words(leaf)} "
    compact = normal.replace(" ", "")
    for origin, fragment in ledger.fragments_of(keep):
        if len(fragment.compact) < MIN_COMPACT:
            continue
        inside = fragment.words in normal or (
            _DIGITS.search(fragment.compact) is not None and fragment.compact in compact
        )
        if inside:
            whole = Probe.of(fragment.text if fragment.text is not None else fragment.compact)
            if whole is None or not ledger.trusted(whole):
                return Refusal(name, keep, (str(origin),), kind="leak", piece=f"a value of {origin.field or 'it'}")
    return None


def _pieces(text: str) -> Iterable[tuple[str, Probe]]:
    """The pieces of a text a :class:`NotFrom` rule looks up on their own: its links, its numbers of five digits or
    more (also written in groups, ``463 820``; not the numbers of a date or a time), its codes."""
    for _, probe in link_probes(text):
        yield "a link", probe
    normal = unicodedata.normalize("NFKC", text[:MAX_TEXT])
    when = When(normal)
    for match in _LONG_NUMBER.finditer(normal):
        token = match.group()
        if sum(ch.isdigit() for ch in token) < 5 or when.covers(*match.span()):
            continue
        number = Probe.of(token)
        if number is not None:
            yield "a number", number
        if _GROUPED.search(token):  # "463 820": the digits as one identifier too
            digits = Probe.of("".join(ch for ch in token if ch.isdigit()))
            if digits is not None:
                yield "a number", digits
    for match in _CODE.finditer(normal):
        code = Probe.of(match.group())
        if code is not None:
            yield "a code", code


__all__ = ["FlowRules"]
