"""Fixtures for the server tests: a real uvicorn server on a free loopback port around the fake desk or the
real support desk (embedded PostgreSQL, one schema per test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from routegate.apps.support.db import EmbeddedPostgres
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.embed import MiniLMEncoder
from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread, support_desk_app
from routegate.settings import Settings

StartServer = Callable[..., ServerThread]


@pytest.fixture
def desk() -> FakeSupportDesk:
    return FakeSupportDesk()


@pytest.fixture
def start_server(desk: FakeSupportDesk) -> Iterator[StartServer]:
    started: list[ServerThread] = []

    def start(**settings: Any) -> ServerThread:
        app = create_app(desk=desk, settings=Settings(**settings))
        server = ServerThread(app).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(start_server: StartServer) -> ServerThread:
    return start_server()


@pytest.fixture
def client(server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


# --- the real desk on embedded PostgreSQL ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector (pgserver) for the server tests, started once."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("server-pg") / "data")
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def encoder() -> MiniLMEncoder:
    enc = MiniLMEncoder()
    enc.warm_up()
    return enc


@pytest.fixture(scope="session")
def semantic(encoder: MiniLMEncoder) -> ExampleEmbeddingLayer:
    return ExampleEmbeddingLayer(encoder)


@pytest.fixture
def start_real_server(
    pg_url: str, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> Iterator[Callable[..., ServerThread]]:
    """``start_real_server(database_url=None, **settings)``: the server around the real desk, own schema."""
    started: list[ServerThread] = []

    def start(database_url: str | None = None, **settings: Any) -> ServerThread:
        url = database_url or pg_url
        server = ServerThread(
            app_factory=lambda: support_desk_app(url, settings=Settings(**settings), encoder=encoder, semantic=semantic)
        ).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def real_server(start_real_server: Callable[..., ServerThread]) -> ServerThread:
    return start_real_server()
