"""The Router node: the labelled set (>= 200 queries), the spec's examples, each layer, and the LLM layer."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support._names import builtin_vocabulary
from routegate.apps.support.contracts import ROUTES, Message
from routegate.apps.support.graph import RouterStep
from routegate.apps.support.payloads import TurnState
from routegate.apps.support.router import QueryArgs, SupportRouter
from routegate.apps.support.rules import SupportRules, correct_typos
from routegate.apps.support.semantic import (
    ExampleEmbeddingLayer,
    FittedSemanticLayer,
    builtin_examples,
    query_args,
    support_route_decision,
)
from routegate.apps.support.turn import read_turn
from routegate.core import RouteDecision, RouteGateway, RoutePolicy, RouteRequest, RunContext
from routegate.core.contracts import DelegationLedger, RouteIntent
from routegate.core.governed import GovernedStep
from routegate.embed import HashingEncoder
from routegate.llm import LLMTimeoutError
from routegate.plan import StepContext
from routegate.routers import SemanticDecision
from routegate.routers._stepped import Routing, RoutingQuery
from routegate.testing import ScriptedChatModel

DATA = Path(__file__).resolve().parents[1] / "data" / "support_routes.jsonl"
RULES = SupportRules.of(builtin_config())  # the built-in desk's rules, as its configuration has them


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def router(semantic: ExampleEmbeddingLayer) -> SupportRouter:
    return SupportRouter(semantic=semantic)


def test_the_labelled_set_is_large_varied_and_well_formed() -> None:
    rows = _rows()
    assert len(rows) >= 200
    assert {r["route"] for r in rows} == set(ROUTES)
    assert {r["kind"] for r in rows} >= {"spec", "paraphrase", "typo", "ambiguous"}
    assert {r["split"] for r in rows} == {"spec", "dev", "test"}
    assert len({r["text"] for r in rows}) == len(rows)
    assert min(Counter(r["route"] for r in rows).values()) >= 40


def test_no_route_example_is_copied_from_the_labelled_set() -> None:
    labelled = {r["text"].lower() for r in _rows()}
    examples = {t.lower() for texts in builtin_examples().values() for t in texts}
    assert not labelled & examples


async def test_offline_accuracy_is_at_least_95_percent(router: SupportRouter) -> None:
    await _assert_accuracy(router)


async def test_offline_accuracy_with_the_fitted_semantic_router(fitted: FittedSemanticLayer) -> None:
    await _assert_accuracy(SupportRouter(semantic=fitted))


async def _assert_accuracy(router: SupportRouter) -> None:
    rows = _rows()
    wrong = []
    for row in rows:
        choice = await router.route_choice(row["text"])
        if choice.route != row["route"]:
            wrong.append((row["text"], row["route"], choice.route, choice.layer))
    accuracy = 1 - len(wrong) / len(rows)
    assert accuracy >= 0.95, wrong


@pytest.mark.parametrize(
    ("text", "route"),
    [
        ("Show tickets for customer John", "POSTGRES"),
        ("What is the status of ticket 12?", "POSTGRES"),
        ("Which city is customer 3 from?", "POSTGRES"),
        ("How do I reset my password?", "VECTOR"),
        ("What is your refund policy?", "VECTOR"),
        ("Explain ticket escalation", "VECTOR"),
        ("What’s the weather today?", "EXTERNAL"),
        ("What is the price of Bitcoin?", "EXTERNAL"),
        ("Give me today’s temperature in London", "EXTERNAL"),
        ("Can you help me?", "LLM"),
        ("What can you do?", "LLM"),
        ("Explain this system", "LLM"),
    ],
)
async def test_every_spec_example_reaches_its_route(router: SupportRouter, text: str, route: str) -> None:
    assert (await router.route_choice(text)).route == route


def test_ticket_escalation_is_vector_not_postgres() -> None:
    verdict = RULES.match("Explain ticket escalation")
    assert verdict.route == "VECTOR"
    assert "POSTGRES" not in verdict.hits


def test_priority_postgres_first_when_a_record_is_named() -> None:
    verdict = RULES.match("How do I check the status of ticket 3?")
    assert verdict.route == "POSTGRES"
    assert "VECTOR" in verdict.hits
    assert "priority over VECTOR" in verdict.why


def test_questions_about_the_assistant_are_llm_even_with_how_to_words() -> None:
    assert RULES.match("How does this system decide?").route == "LLM"
    assert RULES.match("Explain this system").route == "LLM"


@pytest.mark.parametrize(
    ("typo", "fixed"),
    [("tikcet", "ticket"), ("pasword", "password"), ("custmer", "customer"), ("wether", "weather")],
)
def test_typos_of_key_words_are_corrected(typo: str, fixed: str) -> None:
    assert correct_typos(f"the {typo} now", builtin_vocabulary()) == f"the {fixed} now"


def test_ordinary_words_are_left_alone() -> None:
    assert correct_typos("Where is the station?", builtin_vocabulary()) == "where is the station?"


async def test_semantic_layer_decides_what_rules_do_not(router: SupportRouter) -> None:
    choice = await router.route_choice("I want my money back")
    assert choice.route == "VECTOR"
    choice = await router.route_choice("can I be reimbursed?")
    assert choice.layer == "semantic" and choice.route == "VECTOR"
    assert choice.runner_up in ROUTES and choice.margin is not None and choice.margin > 0
    assert set(choice.scores) == {f"semantic:{r}" for r in ROUTES}


async def test_nothing_confident_goes_to_the_llm_route(router: SupportRouter) -> None:
    choice = await router.route_choice("zzzz qqqq")
    assert choice.route == "LLM"
    assert choice.layer in ("semantic", "default")


async def test_llm_layer_decides_when_rules_and_semantic_abstain(semantic: ExampleEmbeddingLayer) -> None:
    model = ScriptedChatModel(['{"kind": "route", "target": "EXTERNAL", "args": {"query": "zzzz qqqq"}}'])
    router = SupportRouter(semantic=semantic, chat_model=model)
    choice = await router.route_choice("zzzz qqqq")
    assert (choice.route, choice.layer) == ("EXTERNAL", "llm")
    model.assert_consumed()
    assert model.calls[0].json_mode


@pytest.mark.parametrize(
    "answer",
    [
        '{"kind": "route", "target": "DELETE_ALL", "args": {}}',
        "POSTGRES",
        '{"kind": "route", "target": "VECTOR", "args": {}, "extra": 1}',
        LLMTimeoutError("slow"),
    ],
)
async def test_a_bad_llm_answer_falls_back_to_the_default_route(
    semantic: ExampleEmbeddingLayer, answer: object
) -> None:
    model = ScriptedChatModel([answer])  # type: ignore[list-item]  # an exception is a valid step too
    router = SupportRouter(semantic=semantic, chat_model=model)
    choice = await router.route_choice("zzzz qqqq")
    assert (choice.route, choice.layer) == ("LLM", "default")
    assert "LLM stage" in choice.why


async def test_rules_settle_before_the_llm_is_asked(semantic: ExampleEmbeddingLayer) -> None:
    model = ScriptedChatModel([])
    router = SupportRouter(semantic=semantic, chat_model=model)
    assert (await router.route_choice("What is the status of ticket 1?")).layer == "rules"
    assert model.calls == []


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
async def test_any_text_gets_exactly_one_allowed_route(text: str) -> None:
    verdict = RULES.match(text)
    assert verdict.route is None or verdict.route in ROUTES


def test_the_fitted_router_is_cached_and_reloaded(encoder: object, fitted: FittedSemanticLayer, data_dir: Path) -> None:
    cached = list(data_dir.glob("support-router-*/manifest.json"))
    assert len(cached) == 1
    again = FittedSemanticLayer.load_or_fit(fitted.router.encoder, data_dir)
    for text in ("can I be reimbursed?", "how warm is it in Oslo", "who filed the billing ticket"):
        assert again.route(text).route == fitted.route(text).route


class _RecordingLayer:
    """An embedding layer that records the conversation it is given and always says EXTERNAL."""

    name = "semantic"

    def __init__(self, encoder: HashingEncoder) -> None:
        self.encoder = encoder
        self.args_builder = query_args
        self.contexts: list[list[object]] = []

    def routing(self, query: RoutingQuery) -> Routing[SemanticDecision]:
        self.contexts.append(list(query.context))
        yield [query.text]
        return SemanticDecision("EXTERNAL", "route", "EXTERNAL", 0.9, 0.9, 0.5, "LLM", 0.4, 0.5, 0.1, {"EXTERNAL": 0.9})

    def to_route_decision(
        self, decision: SemanticDecision, request: RouteRequest, *, allowed: Collection[str], decided_by: str = ""
    ) -> RouteDecision:
        return support_route_decision(decision, request, allowed=allowed, decided_by=decided_by)


async def test_earlier_user_messages_reach_the_embedding_layer() -> None:
    layer = _RecordingLayer(HashingEncoder(dim=8))
    governed = GovernedStep(RoutePolicy(ROUTES, dict.fromkeys(ROUTES, QueryArgs)), RouteGateway(allow=[], registry=[]))
    step = RouterStep(SupportRouter(semantic=layer), governed)
    history = (Message("user", "how warm is it in Rome?"), Message("assistant", "sunny"))
    turn = read_turn("and in Oslo?", session_id="s", history=history)
    run = RunContext(turn, ledger=DelegationLedger(1))
    state = TurnState(turn)
    routed = await step.run_step(state, StepContext("router", None, state, None, run=run))
    assert routed is state and layer.contexts == [["how warm is it in Rome?"]]
    assert state.choice is not None
    assert (state.route, state.choice.route, state.choice.layer) == ("EXTERNAL", "EXTERNAL", "semantic")
    assert state.intent == RouteIntent("EXTERNAL", {"query": "and in Oslo?"})


@pytest.mark.parametrize(
    "text", ["Can you help me?", "can u help me", "Help!", "Could you please help me?", "please help", "help me out"]
)
def test_a_bare_request_for_help_is_settled_by_the_rules(text: str) -> None:
    verdict = RULES.match(text)
    assert verdict.route == "LLM"
    assert verdict.hits["LLM"] == ("bare request for help",)


@pytest.mark.parametrize(
    ("text", "route"),
    [
        ("Can you help me reset my password?", "VECTOR"),
        ("help me with ticket 3", "POSTGRES"),
        ("Can you help me with the weather in Paris?", "EXTERNAL"),
    ],
)
def test_a_request_for_help_with_a_topic_goes_to_the_topic(text: str, route: str) -> None:
    assert RULES.match(text).route == route
