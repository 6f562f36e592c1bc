"""The built-in support desk as one configuration: ``apps/configured/builtin/desk.toml`` (shipped in the package)
holds the built-in desk's customers, tickets, help articles and mock external tool, and the configured desk built
from it answers the contract's example questions on the same routes with the same content — and, through its
``[answers]`` and the tables' ``row`` / ``line`` templates, in the same words (``test_desk_builtin_wording.py``
compares the two desks turn by turn).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from routegate.apps.configured.config import builtin_desk_dir, load_config
from routegate.apps.support.data import ARTICLES, CRYPTO_ANSWER, CUSTOMERS, TICKETS, WEATHER_ANSWER
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings


@pytest.fixture
async def builtin(pg_url: str, encoder: MiniLMEncoder, tmp_path: Path) -> AsyncIterator[SupportAgent]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, builtin_desk_dir(), encoder=encoder) as desk:
        yield desk


async def test_the_shipped_configuration_holds_the_built_in_data(builtin: SupportAgent) -> None:
    async with builtin.data.connection() as conn:
        customers = await (await conn.execute("SELECT id, name, city FROM customers ORDER BY id")).fetchall()
        tickets = await (
            await conn.execute("SELECT id, customer_id, issue, status FROM tickets ORDER BY id")
        ).fetchall()
    assert [tuple(r.values()) for r in customers] == [(c.id, c.name, c.city) for c in CUSTOMERS]
    assert [tuple(r.values()) for r in tickets] == [(t.id, t.customer_id, t.issue, t.status) for t in TICKETS]
    documents = sorted((builtin_desk_dir() / "docs").glob("*.md"))
    assert sorted(p.read_text(encoding="utf-8") for p in documents) == sorted(
        f"# {a.title}\n\n{a.content}\n" for a in ARTICLES
    )
    config = load_config(builtin_desk_dir())
    assert {t.name: (t.mock, t.answer) for t in config.tools} == {
        "weather": ({"result": WEATHER_ANSWER}, "{result}"),
        "crypto": ({"result": CRYPTO_ANSWER}, "{result}"),
    }


@pytest.mark.parametrize(
    ("query", "route", "expected"),
    [  # the contract's examples, with what tests/support/test_support_desk.py asserts of the built-in desk
        ("Show tickets for customer John", "POSTGRES", ["Login not working", "Password reset issue"]),
        ("Which city is customer 3 from?", "POSTGRES", ["Alex Brown", "Toronto"]),
        ("How do I reset my password?", "VECTOR", [ARTICLES[0].content]),
        ("What is your refund policy?", "VECTOR", [ARTICLES[2].content]),
        ("Explain ticket escalation", "VECTOR", [ARTICLES[1].content]),
        ("Can you help me?", "LLM", ["support desk"]),
        ("What can you do?", "LLM", ["tickets"]),
        ("Explain this system", "LLM", ["help articles"]),
    ],
)
async def test_the_contract_examples_reach_the_same_route_and_content(
    builtin: SupportAgent, query: str, route: str, expected: list[str]
) -> None:
    result = await builtin.ask(query, session_id="contract")
    assert (result.route, result.stop_reason, result.fallback) == (route, "success", None)
    for text in expected:
        assert text in result.answer


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("What’s the weather today?", WEATHER_ANSWER),
        ("What is the price of Bitcoin?", CRYPTO_ANSWER),
        ("Give me today’s temperature in London", WEATHER_ANSWER),
    ],
)
async def test_the_external_tool_answers_the_built_in_strings_exactly(
    builtin: SupportAgent, query: str, answer: str
) -> None:
    result = await builtin.ask(query, session_id="external")
    assert (result.route, result.stop_reason, result.answer) == ("EXTERNAL", "success", answer)


async def test_a_tool_message_naming_no_tool_is_not_guessed(builtin: SupportAgent) -> None:
    result = await builtin.ask("What is the price of Ethereum?", session_id="coin")
    assert result.route == "EXTERNAL" and result.fallback == "empty"  # as the built-in mock answers it
    assert WEATHER_ANSWER not in result.answer and CRYPTO_ANSWER not in result.answer
    assert result.answer == (
        "I don't have that information: my external data source only knows today's weather and the Bitcoin price."
    )
