"""The multi-turn follow-up conversations (``tests/data/support_followups.jsonl``), how a turn is scored, and a
scripted stand-in for a chat model, shared by ``test_support_followups.py`` and ``bench/support_followups.py``.

A conversation is 2-5 turns; each turn names the route it must take, the strings its answer must hold
(``expect``) and must not hold (``reject``), and, for every turn after the first, whether it leans on the
conversation (``carry: true``, a follow-up) or not (``carry: false``, a topic change).

:func:`model_responder` answers the scripted OpenAI-compatible server's requests the way a plain model would,
from the prompt alone: text-to-SQL from the ``question`` line (and the ``earlier`` lines, as the offline planner
reads the conversation; one query, the reading a model would write), a route from the router payload's ``goal``, and an answer composed from the evidence in the
answer prompt. It knows nothing the prompt does not say, so a follow-up answered right through it was resolved in
the prompts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.planner import Lookup, SqlPlanner
from routegate.apps.support.rules import SupportRules
from routegate.testing import RecordedRequest, Reply

DATA = Path(__file__).resolve().parents[1] / "data" / "support_followups.jsonl"


@dataclass(frozen=True)
class Turn:
    text: str
    route: str
    expect: tuple[str, ...]
    reject: tuple[str, ...]
    carry: bool | None  # None on a conversation's first turn


@dataclass(frozen=True)
class Conversation:
    id: str
    kind: str  # "carry" | "switch" | "chain"
    turns: tuple[Turn, ...]
    # "dev": the resolver was built on these; "test1": written after it was settled (two fixes followed);
    # "test2": written after those fixes, never tuned on
    split: str


def conversations(path: Path = DATA) -> list[Conversation]:
    out: list[Conversation] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        turns = tuple(
            Turn(t["text"], t["route"], tuple(t["expect"]), tuple(t["reject"]), t.get("carry")) for t in row["turns"]
        )
        out.append(Conversation(row["id"], row["kind"], turns, row["split"]))
    return out


def problems(turn: Turn, route: str, answer: str) -> list[str]:
    """What is wrong with one answered turn (empty: it is right)."""
    found: list[str] = []
    if route != turn.route:
        found.append(f"route {route}, expected {turn.route}")
    found += [f"missing {s!r}" for s in turn.expect if s not in answer]
    found += [f"holds {s!r}" for s in turn.reject if s in answer]
    return found


def _text_to_sql(request: RecordedRequest) -> Reply:
    lines = (request.content("user") or "").splitlines()
    question = next((ln.removeprefix("question: ") for ln in lines if ln.startswith("question: ")), "")
    earlier = [ln.removeprefix("earlier: ") for ln in lines if ln.startswith("earlier: ")]
    lookups = SqlPlanner(builtin_config()).plan(question, earlier)
    if not lookups:  # nothing the tables know: a model asked for what it cannot write gives back nothing usable
        return Reply(json.dumps({"query": "", "params": {}}))
    lookup = _one_reading(question, lookups)
    query, params = lookup.query, dict(lookup.params)
    if (lookup.kind, lookup.table) == ("by_id", "customers"):  # a model selects only what the question needs
        query = "SELECT name, city FROM customers WHERE id = :id"
    # and names its placeholders for what they hold
    names = {"value": "city"} if lookup.table == "customers" else {"v0": "status"}
    if (lookup.kind, lookup.table) == ("children", "tickets"):
        names["id"] = "customer_id"
    for old, new in names.items():
        if old in params:
            params[new] = params.pop(old)
            query = re.sub(rf":{old}\b", f":{new}", query)
    return Reply(json.dumps({"query": query, "params": params}))


def _one_reading(question: str, lookups: list[Lookup]) -> Lookup:
    """The one query a model writes, where the offline planner tries several readings in turn: a capitalised word
    after "in" / "from" is a place (the customers' city), any other one a person (a customer's name)."""
    for lookup in lookups:
        value = lookup.params.get("name") or lookup.params.get("value")
        if not isinstance(value, str):
            return lookup
        bare = value.strip("%")
        placed = re.search(rf"\b(?:in|from)\s+{re.escape(bare)}\b", question, re.IGNORECASE) is not None
        if lookup.kind == "by_name" and placed:
            continue
        if lookup.kind == "filter" and (lookup.table == "tickets") == bare[:1].isupper() and not placed:
            continue
        return lookup
    return lookups[0]


def _route(request: RecordedRequest) -> Reply:
    goal = str(request.user_json().get("goal", ""))
    target = SupportRules.of(builtin_config()).match(goal).route or "LLM"
    return Reply(json.dumps({"kind": "route", "target": target, "args": {"query": goal}}))


def _answer(request: RecordedRequest) -> Reply:
    content = request.content("user") or ""
    question, _, evidence_text = content.partition("\n\nEvidence (JSON):\n")
    evidence: dict[str, Any] = json.loads(evidence_text) if evidence_text else {}
    said, *rest = question.splitlines()
    read_as = re.match(r"\(Read against the conversation as: (.*) — ", rest[0]) if rest else None
    call = evidence.get("call")
    if evidence.get("fallback") == "empty" and isinstance(call, dict) and "looked_for" not in call:
        # nothing found: a model says what it looked for, as it read the question
        asked = read_as.group(1) if read_as else said
        lookups = SqlPlanner(builtin_config()).plan(asked)
        if lookups:
            evidence["call"] = {**call, "looked_for": _one_reading(asked, lookups).looked_for}
    compose = DeskAnswers(builtin_config()).compose
    return Reply(compose(said, str(evidence.get("route", "LLM")), evidence))


def model_responder(request: RecordedRequest) -> Reply:
    """One answer of the scripted model, chosen by the request's system prompt."""
    system = request.system_prompt or ""
    if system.startswith("You write one read-only PostgreSQL query"):
        return _text_to_sql(request)
    if system.startswith("You are the router of "):
        return _route(request)
    return _answer(request)
