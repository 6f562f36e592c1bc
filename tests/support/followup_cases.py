"""The multi-turn follow-up conversations (``tests/data/support_followups.jsonl``), how a turn is scored, and a
scripted stand-in for a chat model, shared by ``test_support_followups.py`` and ``bench/support_followups.py``.

A conversation is 2-5 turns; each turn names the route it must take, the strings its answer must hold
(``expect``) and must not hold (``reject``), and, for every turn after the first, whether it leans on the
conversation (``carry: true``, a follow-up) or not (``carry: false``, a topic change).

:func:`model_responder` answers the scripted OpenAI-compatible server's requests the way a plain model would,
from the prompt alone: text-to-SQL from the ``question`` line (and the ``earlier`` lines, as the offline template
reads the conversation), a route from the router payload's ``goal``, and an answer composed from the evidence in the
answer prompt. It knows nothing the prompt does not say, so a follow-up answered right through it was resolved in
the prompts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routegate.apps.support.respond import compose
from routegate.apps.support.rules import SupportRules
from routegate.apps.support.sql_templates import select_query
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
    call = select_query(question, earlier)
    query, params = call.query, dict(call.params)
    if call.template == "customer_by_id":  # a model selects only what the question needs (no id column)
        query = "SELECT name, city FROM customers WHERE id = :id"
    return Reply(json.dumps({"query": query, "params": params}))


def _route(request: RecordedRequest) -> Reply:
    goal = str(request.user_json().get("goal", ""))
    target = SupportRules().match(goal).route or "LLM"
    return Reply(json.dumps({"kind": "route", "target": target, "args": {"query": goal}}))


def _answer(request: RecordedRequest) -> Reply:
    content = request.content("user") or ""
    question, _, evidence_text = content.partition("\n\nEvidence (JSON):\n")
    evidence: dict[str, Any] = json.loads(evidence_text) if evidence_text else {}
    return Reply(compose(question.splitlines()[0], str(evidence.get("route", "LLM")), evidence))


def model_responder(request: RecordedRequest) -> Reply:
    """One answer of the scripted model, chosen by the request's system prompt."""
    system = request.system_prompt or ""
    if system.startswith("You write one read-only PostgreSQL query"):
        return _text_to_sql(request)
    if system.startswith("You are the router of a customer-support assistant"):
        return _route(request)
    return _answer(request)
