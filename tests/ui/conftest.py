"""Fixtures for the UI tests: the real server (uvicorn on a free loopback port) around a fake desk."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings


@pytest.fixture
def desk() -> FakeSupportDesk:
    return FakeSupportDesk()


@pytest.fixture
def server(desk: FakeSupportDesk) -> Iterator[ServerThread]:
    with ServerThread(create_app(desk=desk, settings=Settings())) as running:
        yield running
