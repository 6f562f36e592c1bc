"""Fixtures for the server tests: a fake desk and a real uvicorn server on a free loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread
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
