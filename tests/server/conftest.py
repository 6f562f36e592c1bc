"""Fixtures for the server tests: a real uvicorn server on a free loopback port around the fake desk or the
real support desk (embedded PostgreSQL, one schema per test)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from routegate.apps.support.db import EmbeddedPostgres
from routegate.apps.support.semantic import FittedSemanticLayer
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


@contextlib.contextmanager
def private_dir(prefix: str) -> Iterator[Path]:
    """A directory outside pytest's numbered ``/tmp/pytest-of-<user>`` folders, which a concurrent pytest run
    of the same user may rotate away under a running PostgreSQL."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector (pgserver) for the server tests, started once."""
    with private_dir("routegate-server-pg-") as base:
        server = EmbeddedPostgres(base / "data")
        url = server.start()
        yield url
        server.stop()


@pytest.fixture
def own_pg() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL of its own, for a test that stops and restarts it."""
    with private_dir("routegate-server-pg-") as base:
        pg = EmbeddedPostgres(base / "data")
        pg.start()
        yield pg
        pg.stop()


@pytest.fixture(scope="session")
def encoder() -> MiniLMEncoder:
    enc = MiniLMEncoder()
    enc.warm_up()
    return enc


@pytest.fixture(scope="session")
def semantic(encoder: MiniLMEncoder) -> FittedSemanticLayer:
    """The router's production embedding layer, fitted once for the session (a few seconds)."""
    return FittedSemanticLayer.load_or_fit(encoder, None)


@pytest.fixture
def start_real_server(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer
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
