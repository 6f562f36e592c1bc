"""The desk's vector and external tools against their success criteria (spec: "Implement Tools Only"), each called
alone, on the built-in configuration: the knowledge base over its three help articles, the mock external tools."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.configured.kb import ingest
from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.data import ARTICLES, CRYPTO_ANSWER, WEATHER_ANSWER
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.nodes import desk_workers
from routegate.apps.support.planner import SqlPlanner
from routegate.apps.support.postgres_tool import PostgresTool
from routegate.apps.support.vector_tool import KnowledgeBase, vector_literal
from routegate.core import Worker
from routegate.embed import MiniLMEncoder


@pytest.fixture
async def vector(db: SupportDatabase, encoder: MiniLMEncoder) -> KnowledgeBase:
    report = await ingest(builtin_config(), builtin_desk_dir(), db, encoder)
    assert len(report.added) == 3
    return KnowledgeBase(db, encoder, min_score=builtin_config().knowledge.min_score)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("How do I reset my password?", "Password Reset Guide"),
        ("What is your refund policy?", "Refund Policy"),
        ("Explain ticket escalation", "Ticket Escalation Policy"),
        ("I forgot my password", "Password Reset Guide"),
        ("can I get my money back?", "Refund Policy"),
    ],
)
async def test_help_questions_find_their_article(vector: KnowledgeBase, query: str, title: str) -> None:
    documents = await vector.search(query)
    assert documents, query
    assert documents[0].heading == title
    article = next(a for a in ARTICLES if a.title == title)
    assert documents[0].content == article.content
    assert 0.4 <= documents[0].score <= 1.0
    assert [d.score for d in documents] == sorted((d.score for d in documents), reverse=True)


@pytest.mark.integration
@pytest.mark.parametrize(
    "query",
    ["What's the weather today?", "What is the price of Bitcoin?", "tell me a joke", "Who won the 1998 World Cup?"],
)
async def test_irrelevant_query_returns_empty(vector: KnowledgeBase, query: str) -> None:
    assert await vector.search(query) == []


@pytest.mark.integration
async def test_top_k_limits_and_blank_query_is_empty(
    vector: KnowledgeBase, db: SupportDatabase, encoder: MiniLMEncoder
) -> None:
    everything = KnowledgeBase(db, encoder, min_score=-1.0)  # the same chunks, none left out
    assert len(await everything.search("support", top_k=2)) == 2
    assert len(await everything.search("support")) == 3
    assert await everything.search("   ") == []


@pytest.mark.integration
async def test_documents_follow_the_contract(vector: KnowledgeBase) -> None:
    doc = (await vector.search("How do I reset my password?"))[0].to_dict()
    assert set(doc) == {"source", "title", "content", "score"}
    assert isinstance(doc["score"], float)


@pytest.mark.integration
@pytest.mark.parametrize("query", ["How do I reset my password?", "refund", "escalate my ticket please"])
async def test_search_scores_are_the_cosine_of_the_query_and_the_article(
    vector: KnowledgeBase, db: SupportDatabase, encoder: MiniLMEncoder, query: str
) -> None:
    """The query's vector reaches PostgreSQL intact (pgvector's binary form): each score is the cosine similarity
    of the query's and the article's vectors as the encoder gives them."""
    everything = KnowledgeBase(db, encoder, min_score=-1.0)  # the same chunks, none left out
    documents = await everything.search(query, top_k=3)
    assert len(documents) == 3
    by_title = {a.title: f"{a.title}. {a.content}" for a in ARTICLES}
    q = np.asarray(encoder.encode([query])[0], dtype=np.float64)
    for document in documents:
        a = np.asarray(encoder.encode([by_title[document.heading]])[0], dtype=np.float64)
        cosine = float(q @ a / (np.linalg.norm(q) * np.linalg.norm(a)))
        assert document.score == pytest.approx(cosine, abs=1e-5), document.heading


@given(st.lists(st.floats(), max_size=40), st.lists(st.floats(width=32), max_size=40))
def test_vector_literal_writes_each_number_to_seven_significant_digits(
    values: list[float], singles: list[float]
) -> None:
    assert vector_literal(values) == "[" + ",".join(f"{v:.7g}" for v in values) + "]"
    as_float32 = np.asarray(singles, dtype=np.float32)  # what the encoder returns
    assert vector_literal(as_float32) == "[" + ",".join(f"{float(v):.7g}" for v in as_float32) + "]"
    if values and all(math.isfinite(v) for v in values):
        assert [float(x) for x in vector_literal(values)[1:-1].split(",")] == pytest.approx(values, rel=1e-6)


def _external() -> Worker:
    """The built-in desk's EXTERNAL node (its mock tools), as the gateway calls it."""
    config = builtin_config()
    sql = PostgresTool(None, columns=config.readable_columns())  # type: ignore[arg-type]  # never called here
    workers = desk_workers(config, sql=sql, planner=SqlPlanner(config), kb=None)  # type: ignore[arg-type]  # unused
    return next(w for w in workers if w.name == "EXTERNAL")


async def _call(query: str) -> dict[str, Any]:
    found: dict[str, Any] = await _external().fn(query)
    return found


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("What's the weather today?", "weather"),
        ("Give me today's temperature in London", "weather"),
        ("is it going to rain?", "weather"),
        ("What is the price of Bitcoin?", "crypto"),
        ("btc price", "crypto"),
        ("how are crypto prices doing", "crypto"),
    ],
)
async def test_the_message_picks_its_tool(query: str, tool: str) -> None:
    observation = await _call(query)
    assert observation["fallback"] is None and observation["call"]["tool"] == tool


async def test_external_answers_are_the_spec_strings() -> None:
    weather = await _call("What's the weather today?")
    crypto = await _call("What is the price of Bitcoin?")
    assert weather["result"] == {"tool": "weather", "response": {"result": WEATHER_ANSWER}, "mock": True}
    assert crypto["result"] == {"tool": "crypto", "response": {"result": CRYPTO_ANSWER}, "mock": True}
    assert WEATHER_ANSWER == "The weather today is sunny with a temperature of 25°C."
    assert CRYPTO_ANSWER == "Bitcoin price is $30,000."


async def test_external_unknown_query_is_empty() -> None:
    observation = await _call("What is the price of Ethereum?")
    assert observation["fallback"] == "empty" and observation["result"] is None
