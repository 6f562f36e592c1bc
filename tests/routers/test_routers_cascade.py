"""CascadeRouter: rules first, semantic next, the LLM stage only when unsure; misroute logging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routegate.core import RoutePolicy, RouteRequest, TicketArgs, worker
from routegate.core.contracts import RouteIntent, RouteProposal, RouteSpec
from routegate.core.protocols import RouteDecision
from routegate.embed import HashingEncoder
from routegate.errors import RunStopError
from routegate.plan import RoutingAgent
from routegate.routers import (
    CascadeRouter,
    FitConfig,
    KeywordRouter,
    LabelledExample,
    MisrouteLog,
    SemanticRouter,
)
from routegate.routers.misroutes import misroutes_of

ROUTES = {
    "POSTGRES": ["show ticket 12", "status of ticket 3", "list open tickets", "customer John Doe", "find customer 2"],
    "VECTOR": ["reset my password", "explain ticket escalation", "refund policy", "change password", "policy docs"],
    "EXTERNAL": ["weather in Paris", "bitcoin price", "weather in London", "ethereum price", "temperature in Tokyo"],
}
CATALOG = tuple(RouteSpec(n, n, {}) for n in [*ROUTES, "LLM"])


class FakeLLMRouter:
    """A stand-in LLM stage that records its calls."""

    def __init__(self, target: str = "VECTOR", fail: bool = False) -> None:
        self.calls: list[str] = []
        self.target = target
        self.fail = fail

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.calls.append(request.goal)
        if self.fail:
            raise RunStopError("llm_timeout", "the model did not answer in time")
        raw = {"kind": "route", "target": self.target, "args": {"ticket": request.goal}}
        return RouteDecision(raw=raw, decided_by="llm", why="model says so")


@pytest.fixture(scope="module")
def semantic() -> SemanticRouter:
    return SemanticRouter.from_routes(
        ROUTES, encoder=HashingEncoder(dim=512), default_route="LLM", config=FitConfig(inscope_coverage=0.8)
    )


@pytest.fixture
def rules() -> KeywordRouter:
    return KeywordRouter({"EXTERNAL": ["weather", "bitcoin"], "POSTGRES": ["ticket"], "VECTOR": ["password"]})


def _req(goal: str) -> RouteRequest:
    return RouteRequest(goal=goal, catalog=CATALOG)


async def test_rules_settle_unambiguous_requests(semantic: SemanticRouter, rules: KeywordRouter) -> None:
    llm = FakeLLMRouter()
    cascade = CascadeRouter(semantic=semantic, rules=rules, llm=llm)
    decision = await cascade.decide(_req("what's the weather in Oslo"))
    assert decision.decided_by == "cascade:rules"
    assert RoutePolicy([s.name for s in CATALOG]).validate(decision.raw) == RouteIntent(
        "EXTERNAL", {"ticket": "what's the weather in Oslo"}
    )
    assert llm.calls == []


async def test_rule_tie_goes_to_semantic(semantic: SemanticRouter, rules: KeywordRouter) -> None:
    cascade = CascadeRouter(semantic=semantic, rules=rules)
    offline = cascade.route("ticket about my password")
    assert offline.stage == "semantic"
    assert "tie" in offline.why
    decision = await cascade.decide(_req("ticket about my password"))
    assert decision.decided_by == "cascade:semantic"


async def test_llm_only_when_semantic_is_unsure(semantic: SemanticRouter) -> None:
    llm = FakeLLMRouter(target="VECTOR")
    cascade = CascadeRouter(semantic=semantic, llm=llm)
    sure = await cascade.decide(_req("show ticket 12"))
    assert sure.decided_by == "cascade:semantic"
    assert llm.calls == []
    unsure = await cascade.decide(_req("qqq zzz xyzzy"))
    assert unsure.decided_by == "cascade:llm"
    assert llm.calls == ["qqq zzz xyzzy"]
    assert "semantic unsure (default)" in unsure.why
    assert "runner-up" in unsure.why


async def test_llm_failure_keeps_the_semantic_decision(semantic: SemanticRouter) -> None:
    cascade = CascadeRouter(semantic=semantic, llm=FakeLLMRouter(fail=True))
    decision = await cascade.decide(_req("qqq zzz xyzzy"))
    assert decision.decided_by == "cascade:semantic"
    assert isinstance(decision.raw, RouteProposal)  # built by the router itself: proposed typed
    assert decision.raw.target == "LLM"
    assert "llm_timeout" in decision.why


async def test_cascade_in_a_governed_run_and_misroute_log(semantic: SemanticRouter, tmp_path: Path) -> None:
    @worker(name="POSTGRES", args=TicketArgs, inline=True)
    def postgres(ticket: str) -> dict[str, Any]:
        return {"status": "needs_reroute", "reason": "not_a_database_question", "domain": "postgres"}

    @worker(name="VECTOR", args=TicketArgs, inline=True)
    def vector(ticket: str) -> dict[str, Any]:
        return {"status": "done", "domain": "vector", "result": "the escalation article"}

    @worker(name="LLM", args=TicketArgs, inline=True)
    def llm_node(ticket: str) -> dict[str, Any]:
        return {"status": "done", "domain": "llm", "result": "hello"}

    rules = KeywordRouter({"POSTGRES": ["ticket"]})
    agent = RoutingAgent(workers=[postgres, vector, llm_node], router=CascadeRouter(semantic=semantic, rules=rules))
    result = await agent.arun("explain ticket escalation")
    assert result.ok
    assert result.selected_route == "VECTOR"  # POSTGRES asked for a reroute; the cascade skipped it
    assert result.trace[0].decided_by == "cascade:rules"
    log = MisrouteLog(tmp_path / "misroutes.jsonl")
    assert log.record_run(result) == 1
    assert misroutes_of(result)[0].wrong_route == "POSTGRES"
    assert log.examples() == [LabelledExample("explain ticket escalation", "VECTOR")]
    # the logged example feeds the next fit
    train = [LabelledExample(t, r) for r, ts in ROUTES.items() for t in ts] + log.examples()
    refit = SemanticRouter.fit(train, encoder=HashingEncoder(dim=512), default_route="LLM")
    assert refit.route("explain ticket escalation").top == "VECTOR"


def test_misroute_log_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"text": "x"}\n')
    with pytest.raises(Exception, match="not a misroute record"):
        MisrouteLog(path).read()
    assert MisrouteLog(tmp_path / "none.jsonl").examples() == []
