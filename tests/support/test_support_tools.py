"""The vector and external tools against their success criteria (spec: "Implement Tools Only")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.apps.support.data import ARTICLES, CRYPTO_ANSWER, WEATHER_ANSWER
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.external_tool import ExternalTool, detect_type
from routegate.apps.support.vector_tool import VectorTool, vector_literal
from routegate.embed import MiniLMEncoder
from routegate.errors import ConfigurationError


@pytest.fixture
async def vector(db: SupportDatabase, encoder: MiniLMEncoder) -> VectorTool:
    tool = VectorTool(db, encoder)
    assert await tool.index() == 3
    return tool


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
async def test_help_questions_find_their_article(vector: VectorTool, query: str, title: str) -> None:
    documents = await vector.search(query)
    assert documents, query
    assert documents[0].title == title
    article = next(a for a in ARTICLES if a.title == title)
    assert documents[0].content == article.content
    assert 0.4 <= documents[0].score <= 1.0
    assert [d.score for d in documents] == sorted((d.score for d in documents), reverse=True)


@pytest.mark.integration
@pytest.mark.parametrize(
    "query",
    ["What's the weather today?", "What is the price of Bitcoin?", "tell me a joke", "Who won the 1998 World Cup?"],
)
async def test_irrelevant_query_returns_empty(vector: VectorTool, query: str) -> None:
    assert await vector.search(query) == []


@pytest.mark.integration
async def test_top_k_limits_and_blank_query_is_empty(db: SupportDatabase, encoder: MiniLMEncoder) -> None:
    tool = VectorTool(db, encoder, min_score=-1.0)
    await tool.index()
    assert len(await tool.search("support", top_k=2)) == 2
    assert len(await tool.search("support")) == 3
    assert await tool.search("   ") == []
    with pytest.raises(ConfigurationError, match="top_k"):
        await tool.search("x", top_k=0)


@pytest.mark.integration
async def test_documents_follow_the_contract(vector: VectorTool) -> None:
    doc = (await vector.search("How do I reset my password?"))[0].to_dict()
    assert set(doc) == {"title", "content", "score"}
    assert isinstance(doc["score"], float)


@pytest.mark.integration
@pytest.mark.parametrize("query", ["How do I reset my password?", "refund", "escalate my ticket please"])
async def test_search_scores_are_the_cosine_of_the_query_and_the_article(
    db: SupportDatabase, encoder: MiniLMEncoder, query: str
) -> None:
    """The query's vector reaches PostgreSQL intact (pgvector's binary form): each score is the cosine similarity
    of the query's and the article's vectors as the encoder gives them."""
    tool = VectorTool(db, encoder, min_score=-1.0)
    await tool.index()
    documents = await tool.search(query, top_k=3)
    assert len(documents) == 3
    by_title = {a.title: f"{a.title}. {a.content}" for a in ARTICLES}
    q = np.asarray(encoder.encode([query])[0], dtype=np.float64)
    for document in documents:
        a = np.asarray(encoder.encode([by_title[document.title]])[0], dtype=np.float64)
        cosine = float(q @ a / (np.linalg.norm(q) * np.linalg.norm(a)))
        assert document.score == pytest.approx(cosine, abs=1e-5), document.title


@given(st.lists(st.floats(), max_size=40), st.lists(st.floats(width=32), max_size=40))
def test_vector_literal_writes_each_number_to_seven_significant_digits(
    values: list[float], singles: list[float]
) -> None:
    assert vector_literal(values) == "[" + ",".join(f"{v:.7g}" for v in values) + "]"
    as_float32 = np.asarray(singles, dtype=np.float32)  # what the encoder returns
    assert vector_literal(as_float32) == "[" + ",".join(f"{float(v):.7g}" for v in as_float32) + "]"
    if values and all(math.isfinite(v) for v in values):
        assert [float(x) for x in vector_literal(values)[1:-1].split(",")] == pytest.approx(values, rel=1e-6)


def test_min_score_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="min_score"):
        VectorTool(None, None, min_score=2.0)  # type: ignore[arg-type]  # refused before they are used


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("What's the weather today?", "weather"),
        ("Give me today's temperature in London", "weather"),
        ("is it going to rain?", "weather"),
        ("What is the price of Bitcoin?", "crypto"),
        ("btc price", "crypto"),
        ("how are crypto prices doing", "crypto"),
        ("What is the capital of France?", None),
    ],
)
def test_detect_type(query: str, kind: str | None) -> None:
    assert detect_type(query) == kind


def test_external_answers_are_the_spec_strings() -> None:
    tool = ExternalTool()
    weather = tool.call("weather", "What's the weather today?")
    crypto = tool.call("crypto", "What is the price of Bitcoin?")
    assert weather is not None and weather.to_dict() == {"result": WEATHER_ANSWER, "source": "mock"}
    assert crypto is not None and crypto.to_dict() == {"result": CRYPTO_ANSWER, "source": "mock"}
    assert WEATHER_ANSWER == "The weather today is sunny with a temperature of 25°C."
    assert CRYPTO_ANSWER == "Bitcoin price is $30,000."


def test_external_unknown_query_is_empty() -> None:
    assert ExternalTool().call("crypto", "What is the price of Ethereum?") is None
