"""Fixtures for the UI tests: the real server (uvicorn on a free loopback port) around the fake desk, or around
the real support desk on embedded PostgreSQL (for the browser test)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from routegate.apps.support.db import EmbeddedPostgres
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread, support_desk_app
from routegate.settings import Settings


@pytest.fixture
def desk() -> FakeSupportDesk:
    return FakeSupportDesk()


@pytest.fixture
def server(desk: FakeSupportDesk) -> Iterator[ServerThread]:
    with ServerThread(create_app(desk=desk, settings=Settings())) as running:
        yield running


@pytest.fixture(scope="session")
def ui_pg_url() -> Iterator[str]:
    # outside /tmp/pytest-of-<user>: a concurrent pytest run of the same user may rotate those folders away
    base = Path(tempfile.mkdtemp(prefix="routegate-ui-pg-"))
    try:
        pg = EmbeddedPostgres(base / "data")
        yield pg.start()
        pg.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def ui_desk_parts() -> tuple[MiniLMEncoder, FittedSemanticLayer]:
    encoder = MiniLMEncoder()
    return encoder, FittedSemanticLayer.load_or_fit(encoder, None)


@pytest.fixture
def real_server(ui_pg_url: str, ui_desk_parts: tuple[MiniLMEncoder, FittedSemanticLayer]) -> Iterator[ServerThread]:
    encoder, semantic = ui_desk_parts
    factory = ServerThread(
        app_factory=lambda: support_desk_app(ui_pg_url, settings=Settings(), encoder=encoder, semantic=semantic)
    )
    with factory as running:
        yield running
