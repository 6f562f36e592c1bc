"""An app given how to open its desk (``create_app(open_desk=...)``, what each ``serve --workers N`` worker and
each Ray Serve replica builds) opens it in its lifespan, before the caller's own lifespan runs, serves it, and
closes it when the server stops; while it is not open, every endpoint answers 503 ``desk_not_open``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from routegate.apps.support.contracts import SupportDesk
from routegate.errors import ConfigurationError
from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk
from routegate.settings import Settings

JSON = {"Accept": "application/json"}


class Opener:
    """Opens one fake desk, and writes down what happened in order (the caller's lifespan writes there too)."""

    def __init__(self) -> None:
        self.desk = FakeSupportDesk()
        self.steps: list[str] = []

    def __call__(self) -> contextlib.AbstractAsyncContextManager[SupportDesk]:
        return self._open()

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[SupportDesk]:
        self.steps.append("desk opened")
        try:
            yield self.desk
        finally:
            self.steps.append("desk closed")


def test_the_app_opens_its_desk_serves_it_and_closes_it_on_shutdown() -> None:
    opener = Opener()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opener.steps.append("lifespan started")
        yield
        opener.steps.append("lifespan ended")

    app = create_app(open_desk=opener, settings=Settings(), lifespan=lifespan)
    assert opener.steps == []  # building the app opens nothing
    with TestClient(app) as client:
        assert opener.steps == ["desk opened", "lifespan started"]  # the caller's lifespan finds the desk open
        turn = client.post("/chat", json={"message": "Which city is customer 2 from?", "session_id": "s"}, headers=JSON)
        assert turn.status_code == 200, turn.text
        assert turn.json()["route"] == "POSTGRES"
        assert opener.desk.histories["s"][0].content == "Which city is customer 2 from?"
        assert client.get("/sessions/s").json()["messages"]
        assert client.get("/healthz").json()["status"] == "ok"
    assert opener.steps == ["desk opened", "lifespan started", "lifespan ended", "desk closed"]


def test_a_conversation_the_client_sends_reaches_the_opened_desk() -> None:
    """The client's history (``/v1/chat/completions`` without a session) goes to the desk the app opened."""
    opener = Opener()
    with TestClient(create_app(open_desk=opener, settings=Settings())) as client:
        answer = client.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "messages": [
                    {"role": "user", "content": "Which city is customer 2 from?"},
                    {"role": "assistant", "content": "London."},
                    {"role": "user", "content": "and his tickets?"},
                ],
            },
        )
    assert answer.status_code == 200, answer.text
    session = answer.json()["routegate"]["session_id"]
    assert [(m.role, m.content) for m in opener.desk.supplied[session]] == [
        ("user", "Which city is customer 2 from?"),
        ("assistant", "London."),
    ]


def test_while_the_desk_is_not_open_every_endpoint_answers_503() -> None:
    opener = Opener()
    app = create_app(open_desk=opener, settings=Settings(server_api_key="k"))
    client = TestClient(app)  # outside `with`: the lifespan does not run, as under a server that runs none
    for answer in (
        client.post("/chat", json={"message": "hello"}, headers=JSON),
        client.get("/sessions/s", headers={"Authorization": "Bearer k"}),
        client.get("/plan"),
    ):
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "5"
        assert answer.json()["error"]["code"] == "desk_not_open"
        assert "not open" in answer.json()["error"]["message"]
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] == "unavailable"
    assert opener.steps == []

    with TestClient(app) as running:
        assert running.get("/healthz").status_code == 200
    after = client.post("/chat", json={"message": "hello"}, headers=JSON)  # the desk closed with the server
    assert opener.steps[-1] == "desk closed"
    assert after.status_code == 503 and after.json()["error"]["code"] == "desk_not_open"


@pytest.mark.parametrize("given", ["both", "neither"])
def test_the_app_takes_a_desk_or_how_to_open_one(given: str) -> None:
    opener = Opener()
    desks = {"desk": opener.desk, "open_desk": opener} if given == "both" else {}
    with pytest.raises(
        ConfigurationError, match=rf"a desk \(desk=\) or how to open one \(open_desk=\), one of them: got {given}$"
    ):
        create_app(settings=Settings(), **desks)  # type: ignore[arg-type]  # the misuse, on purpose
