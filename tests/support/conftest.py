"""Fixtures of the support-desk tests: one embedded PostgreSQL per test session, one schema per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
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


@asynccontextmanager
async def _seeded_database(
    pg_url: str, dim: int, *, min_size: int = 1, max_size: int = 2
) -> AsyncIterator[SupportDatabase]:
    """A seeded schema of its own, dropped afterwards; the pool's size is the caller's."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    database = SupportDatabase(pg_url, schema=schema, min_size=min_size, max_size=max_size)
    await database.open()
    try:
        await database.ensure_schema()
        yield database
    finally:
        async with database.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await database.close()


@pytest.fixture
async def db(pg_url: str, encoder: MiniLMEncoder) -> AsyncIterator[SupportDatabase]:
    """A seeded schema of its own for each test, dropped afterwards."""
    async with _seeded_database(pg_url, encoder.dim) as database:
        yield database


@pytest.fixture(scope="session")
def seeded_database() -> Callable[..., AbstractAsyncContextManager[SupportDatabase]]:
    """``async with seeded_database(pg_url, dim, max_size=1) as db:`` — a schema of its own, any pool size."""
    return _seeded_database


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
