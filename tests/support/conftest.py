"""Fixtures of the support-desk tests: one embedded PostgreSQL per test session, one schema per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.semantic import ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MiniLMEncoder


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector (pgserver), started once for the whole test session."""
    base: Path = tmp_path_factory.mktemp("pg")
    server = EmbeddedPostgres(base / "data")
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def encoder() -> MiniLMEncoder:
    enc = MiniLMEncoder()
    enc.warm_up()
    return enc


@pytest.fixture
async def db(pg_url: str, encoder: MiniLMEncoder) -> AsyncIterator[SupportDatabase]:
    """A seeded schema of its own for each test, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    database = SupportDatabase(pg_url, schema=schema, max_size=2)
    await database.open()
    try:
        await database.ensure_schema(embedding_dim=encoder.dim)
        yield database
    finally:
        async with database.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await database.close()


@pytest.fixture(scope="session")
def semantic(encoder: MiniLMEncoder) -> ExampleEmbeddingLayer:
    """The router's embedding layer, built once (it embeds every route example)."""
    return ExampleEmbeddingLayer(encoder)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROUTEGATE_DATA_DIR for the CLI tests: one per session, so the fitted router is cached once."""
    return tmp_path_factory.mktemp("routegate-data")


@pytest.fixture(scope="session")
def fitted(encoder: MiniLMEncoder, data_dir: Path) -> FittedSemanticLayer:
    """``routegate.routers.semantic.SemanticRouter`` fitted on the route examples (cached in ``data_dir``)."""
    return FittedSemanticLayer.load_or_fit(encoder, data_dir)
