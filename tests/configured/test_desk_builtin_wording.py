"""The built-in desk's configuration (``apps/configured/builtin/desk.toml``) answers as ``apps.support`` does: every
example question of the contract, and every conversation whose answer text ``tests/support`` checks, runs through
both desks (the same encoder, the same embedding-layer kind — each desk's fitted layer, then the nearest examples —
each on its own schema of the same PostgreSQL); the route, the answer text, the stop reason and the fallback are the
same turn by turn — and on the 204 labelled messages of ``tests/data/support_routes.jsonl``, every one of them."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from routegate.apps.configured.config import builtin_desk_dir, load_config
from routegate.apps.configured.desk import ConfiguredDesk
from routegate.apps.configured.factory import open_configured_desk
from routegate.apps.configured.router import route_examples
from routegate.apps.configured.rules import KIND_ROUTE
from routegate.apps.support.contracts import ROUTES, TurnResult
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.rules import ABOUT, PATTERNS, VOCABULARY
from routegate.apps.support.semantic import EXAMPLES, EmbeddingLayer, ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

CONTRACT = [  # the contract's eleven example questions (tests/support/test_support_desk.py)
    "Show tickets for customer John",
    "Which city is customer 3 from?",
    "How do I reset my password?",
    "What is your refund policy?",
    "Explain ticket escalation",
    "What’s the weather today?",
    "What is the price of Bitcoin?",
    "Give me today’s temperature in London",
    "Can you help me?",
    "What can you do?",
    "Explain this system",
]

CONVERSATIONS = [  # what tests/support asserts of answers, one session each
    ["What is the status of ticket 12?"],  # not found
    ["How do I change my email address?"],  # no help article
    ["What is the price of Ethereum?"],  # the external source knows nothing of it
    ["What's the weather today?"],
    ["What is the status of ticket 1?"],
    ["What is the status of ticket 99?"],
    ["hello there"],
    ["purple elephants dancing"],
    ["Which city is customer 2 from?", "Which tickets does she have?"],
    ["What is the status of ticket 1?", "And which city is he from?"],
    ["status of ticket 3", "who is the customer?"],
    ["hello", "status of ticket 2", "thanks", "where does he live?"],
    ["What is the status of ticket 1?", "How do I reset my password?"],
    ["What is the status of ticket 1?", "Which city is customer 2 from?"],
    ["Which city is customer 3 from?", "does he have any tickets?"],
    ["Who is customer 1?", "Which city is Jane Smith from?", "goodbye"],
    ["What's the price of gold today?"],  # no tool is about it
    ["crypto price of ethereum"],  # a coin the mock does not price
    ["How hot is it outside?", "thnks", "helo"],
]


@pytest.fixture(scope="module", params=["fitted", "examples"])
def layer_kind(request: pytest.FixtureRequest) -> str:
    """The embedding-layer kind both desks route with: ``fitted``, each desk's production layer (the built-in desk's
    fitted router; the configuration's ``[router] fit_at_start``), or ``examples``, the nearest examples."""
    kind: str = request.param
    return kind


@pytest.fixture(scope="module")
def semantic(encoder: MiniLMEncoder, layer_kind: str) -> EmbeddingLayer:
    return FittedSemanticLayer.fit(encoder) if layer_kind == "fitted" else ExampleEmbeddingLayer(encoder)


@pytest.fixture(scope="module")
def builtin_dir(layer_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in configuration, or a copy of it routing with the nearest examples."""
    if layer_kind == "fitted":
        return builtin_desk_dir()
    copy = Path(shutil.copytree(builtin_desk_dir(), tmp_path_factory.mktemp("builtin-examples") / "support"))
    toml = copy / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert "fit_at_start = true\n" in text
    toml.write_text(text.replace("fit_at_start = true\n", "fit_at_start = false\n"), encoding="utf-8")
    return copy


@pytest.fixture
async def builtin(pg_url: str, encoder: MiniLMEncoder, semantic: EmbeddingLayer) -> AsyncIterator[SupportAgent]:
    schema = f"w_{uuid.uuid4().hex[:12]}"
    db = SupportDatabase(pg_url, schema=schema, max_size=2)
    await db.open()
    try:
        await db.ensure_schema(embedding_dim=encoder.dim)
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        yield desk
        async with db.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await db.close()


@pytest.fixture
async def configured(
    pg_url: str, encoder: MiniLMEncoder, builtin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ConfiguredDesk]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path_factory.mktemp("builtin-wording"))
    async with open_configured_desk(settings, builtin_dir, encoder=encoder) as desk:
        yield desk


def test_the_builtin_configuration_carries_apps_support_rules_and_examples() -> None:
    """desk.toml's rules, typo words and examples are ``apps.support``'s, phrase for phrase (so they cannot drift)."""
    config = load_config(builtin_desk_dir())
    phrases: dict[str, dict[str, str]] = {route: {} for route in ROUTES}
    for route in config.routes:
        phrases[KIND_ROUTE[route.kind]].update({rule.name: rule.pattern for rule in route.rules})
    assert phrases == {route: dict(PATTERNS[route]) for route in ROUTES}
    assert {rule.name for route in config.routes for rule in route.rules if rule.about} == set(ABOUT)
    assert config.router.typo_words == list(VOCABULARY) and not config.router.generated_rules
    examples = route_examples(config)
    assert {route: list(examples[route]) for route in ROUTES} == {route: list(EXAMPLES[route]) for route in ROUTES}


def _seen(result: TurnResult) -> tuple[str, str, str, str | None]:
    return result.route, result.answer, result.stop_reason, result.fallback


async def test_the_contract_examples_are_answered_word_for_word(
    builtin: SupportAgent, configured: ConfiguredDesk
) -> None:
    session = uuid.uuid4().hex[:8]
    for index, message in enumerate(CONTRACT):
        expected = await builtin.ask(message, session_id=f"b{session}{index}")
        got = await configured.ask(message, session_id=f"c{session}{index}")
        assert _seen(got) == _seen(expected), message
        assert expected.stop_reason == "success" and expected.fallback is None


async def test_the_conversations_tests_support_checks_are_answered_word_for_word(
    builtin: SupportAgent, configured: ConfiguredDesk
) -> None:
    session = uuid.uuid4().hex[:8]
    for number, turns in enumerate(CONVERSATIONS):
        for message in turns:
            expected = await builtin.ask(message, session_id=f"b{session}{number}")
            got = await configured.ask(message, session_id=f"c{session}{number}")
            assert _seen(got) == _seen(expected), f"{turns}: {message}"


LABELLED = Path(__file__).resolve().parents[1] / "data" / "support_routes.jsonl"


def _labelled_messages() -> list[str]:
    with LABELLED.open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines if line.strip()]


KNOWN: dict[str, str] = {}
"""The messages the two desks still answer differently, and why (any other difference fails the test)."""


async def test_every_labelled_message_is_answered_alike(builtin: SupportAgent, configured: ConfiguredDesk) -> None:
    """All the messages of ``tests/data/support_routes.jsonl``, each in a session of its own: the same route,
    answer, stop reason and fallback from both desks, but for the :data:`KNOWN` ones."""
    session = uuid.uuid4().hex[:8]
    differences: dict[str, str] = {}
    messages = _labelled_messages()
    for number, message in enumerate(messages):
        expected = await builtin.ask(message, session_id=f"b{session}{number}")
        got = await configured.ask(message, session_id=f"c{session}{number}")
        if _seen(got) != _seen(expected):
            differences[message] = f"built-in {_seen(expected)} / configured {_seen(got)}"
    assert len(messages) == 204
    unexplained = {m: d for m, d in differences.items() if m not in KNOWN}
    assert not unexplained, f"{len(differences)} of {len(messages)} differ:\n" + "\n".join(
        f"{m!r}: {d}" for m, d in unexplained.items()
    )
    assert set(differences) == set(KNOWN)  # a known difference that is gone: remove it from KNOWN
