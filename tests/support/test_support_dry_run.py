"""The desk's dry run (``routegate route``) as app logic: :mod:`routegate.apps.support.routing` routes a line and
checks the choice with the desk's policy through the same typed decision as the desk's router step."""

from __future__ import annotations

import json

from routegate.apps.support.router import SupportRouter
from routegate.apps.support.routing import route_batch, route_line
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core import RoutePolicy
from routegate.core.contracts import RouteProposal
from routegate.embed.memo import MemoEncoder
from routegate.embed.minilm import MiniLMEncoder

TICKET = "What is the status of ticket 12?"


async def test_a_route_the_policy_does_not_allow_is_printed_as_refused(semantic: ExampleEmbeddingLayer) -> None:
    router = SupportRouter(semantic=semantic, policy=RoutePolicy({"VECTOR", "EXTERNAL", "LLM"}))
    out = json.loads(await route_line(router, {"text": TICKET, "route": "POSTGRES"}, as_json=True))
    assert (out["route"], out["layer"]) == ("POSTGRES", "rules")
    assert out["policy"] == "refused: invalid_route:route_not_allowed:POSTGRES"
    assert out["expected"] == "POSTGRES" and out["correct"] is True


async def test_the_dry_run_checks_the_decision_the_desk_checks(semantic: ExampleEmbeddingLayer) -> None:
    router = SupportRouter(semantic=semantic)
    choice = await router.route_choice(TICKET)
    decision = choice.decision(TICKET)
    assert decision.raw == RouteProposal("POSTGRES", {"query": TICKET})
    assert (decision.decided_by, decision.why) == ("rules", choice.why)
    out = json.loads(await route_line(router, {"text": TICKET}, as_json=True))
    assert out["policy"] == "allowed" and "expected" not in out
    assert await route_line(router, {"text": TICKET}, as_json=False) == f"POSTGRES  (rules: {choice.why})"


async def test_a_batch_prints_what_each_line_alone_prints_in_order(encoder: MiniLMEncoder) -> None:
    memo = MemoEncoder(encoder)
    router = SupportRouter(semantic=ExampleEmbeddingLayer(memo))
    items = [{"text": t} for t in (TICKET, "how do I get my money back", "hello there", "bitcoin price", TICKET)]
    batch = await route_batch(router, memo, items, as_json=True)
    alone = [await route_line(router, item, as_json=True) for item in items]
    assert batch == alone and len(batch) == len(items)
