"""Tenants, the text check and fault answers around the real desk on PostgreSQL, checked in the database."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.server._auth import owner_of
from routegate.server.testing import ServerThread, support_desk_app
from routegate.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

KEY_A, KEY_B = "real-key-a-3c1d", "real-key-b-9a7e"
JSON = {"Accept": "application/json"}


class Schema:
    """The server's own schema, read (and damaged) from outside the server with a connection of our own."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name

    def run(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(self.name)))
            cur = conn.execute(statement.encode(), params)
            return cur.fetchall() if cur.description else []

    def messages(self) -> list[tuple[str, str, str]]:
        return [
            (r[0], r[1], r[2]) for r in self.run("SELECT session_id, role, content FROM support_messages ORDER BY id")
        ]


@pytest.fixture
def served(
    pg_url: str, encoder: MiniLMEncoder, semantic: FittedSemanticLayer
) -> Iterator[Callable[..., tuple[ServerThread, Schema]]]:
    started: list[ServerThread] = []

    def start(**settings: Any) -> tuple[ServerThread, Schema]:
        name = f"srv_{uuid.uuid4().hex[:12]}"
        server = ServerThread(
            app_factory=lambda: support_desk_app(
                pg_url, settings=Settings(**settings), schema=name, encoder=encoder, semantic=semantic
            )
        ).start()
        started.append(server)
        return server, Schema(pg_url, name)

    yield start
    for server in started:
        server.stop()


def _client(server: ServerThread, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server.url, timeout=30, headers=headers)


def test_two_keys_cannot_reach_each_others_sessions_in_the_database(
    served: Callable[..., tuple[ServerThread, Schema]],
) -> None:
    server, schema = served(server_api_keys=f"{KEY_A},{KEY_B}")
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        assert (
            a.post("/chat", json={"message": "What is the status of ticket 1?", "session_id": "s1"}).status_code == 200
        )
        stored = schema.messages()
        assert [(s, r) for s, r, _ in stored] == [
            (f"{owner_of(KEY_A)}:s1", "user"),
            (f"{owner_of(KEY_A)}:s1", "assistant"),
        ]

        attempts = [
            b.get("/sessions/s1"),
            b.delete("/sessions/s1"),
            b.post("/chat", json={"message": "intruder", "session_id": "s1"}, headers=JSON),
            b.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "intruder"}], "user": "s1"},
            ),
        ]
        assert [r.status_code for r in attempts] == [404] * 4
        assert all(r.json()["error"]["code"] == "session_not_found" for r in attempts)

        history = a.get("/sessions/s1").json()["messages"]
        assert history[0]["content"] == "What is the status of ticket 1?"
        assert len(history) == 2
        assert schema.messages() == stored  # nothing added, nothing deleted
        assert not any(s.startswith(owner_of(KEY_B)) for s, _, _ in schema.messages())


def test_nul_and_surrogates_are_422_and_never_reach_the_database(
    served: Callable[..., tuple[ServerThread, Schema]],
) -> None:
    server, schema = served()
    bodies = [
        ("/chat", b'{"message": "a\\u0000b", "session_id": "n1"}'),
        ("/chat", b'{"message": "a\\ud800b", "session_id": "n1"}'),
        (
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "a\\u0000b"}], "user": "n1"}',
        ),
        (
            "/v1/chat/completions",
            b'{"model": "m", "messages": [{"role": "user", "content": "a\\udfffb"}], "user": "n1"}',
        ),
    ]
    with _client(server) as c:
        for path, raw in bodies:
            response = c.post(path, content=raw, headers={"Content-Type": "application/json"})
            assert response.status_code == 422, response.text
            assert response.json()["error"]["code"] == "invalid_request"
            assert "DataError" not in response.text
    assert schema.messages() == []


def test_a_broken_database_answers_in_the_servers_words(served: Callable[..., tuple[ServerThread, Schema]]) -> None:
    """The memory table disappears under the running server: every answer is an error in the server's words,
    never the driver's (``UndefinedTable``, ``relation "support_messages" does not exist``)."""
    server, schema = served()
    with _client(server) as c:
        assert c.post("/chat", json={"message": "hi", "session_id": "f1"}, headers=JSON).status_code == 200
        schema.run("DROP TABLE support_messages")
        requests: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = [
            ("POST", "/chat", {"message": "hi", "session_id": "f1"}, JSON),
            ("POST", "/chat", {"message": "hi", "session_id": "f1"}, {}),
            ("GET", "/sessions/f1", None, {}),
            ("DELETE", "/sessions/f1", None, {}),
            ("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {}),
        ]
        answers = []
        for method, path, body, headers in requests:
            server.app.state.services.database.mark(up=True)  # each request goes to the desk, none fails fast
            answers.append(c.request(method, path, json=body, headers=headers))
    assert {r.status_code for r in answers[2:4]} == {500}  # history and reset raised the driver's error
    for response in answers:
        assert response.status_code in (200, 500, 503), response.text  # 200: a stream that ends in `error`
        for leak in ("UndefinedTable", "does not exist", "support_messages", "psycopg", "Error:"):
            assert leak not in response.text, response.text


def test_the_longest_session_id_works_behind_a_key(served: Callable[..., tuple[ServerThread, Schema]]) -> None:
    """128 characters from the client + the 17-character owner prefix: the desk's memory takes it."""
    server, schema = served(server_api_keys=KEY_A)
    sid = "L" * 128
    with _client(server, KEY_A) as a:
        reply = a.post("/chat", json={"message": "hi", "session_id": sid}, headers=JSON)
        assert reply.status_code == 200, reply.text
        assert reply.json()["session_id"] == sid
        assert len(a.get(f"/sessions/{sid}").json()["messages"]) == 2
    assert {s for s, _, _ in schema.messages()} == {f"{owner_of(KEY_A)}:{sid}"}


def test_a_failing_tool_is_reported_by_code_not_by_the_drivers_text(
    served: Callable[..., tuple[ServerThread, Schema]],
) -> None:
    server, schema = served()
    schema.run("DROP TABLE tickets CASCADE")
    with _client(server) as c:
        question = {"message": "What is the status of ticket 1?", "session_id": "t1"}
        answers = [c.post("/chat", json=question, headers=JSON), c.post("/chat", json=question)]
    for response in answers:
        assert response.status_code == 200
        assert "tool_error:database_error" in response.text  # the tool failed, and says so by its code
        for leak in ("UndefinedTable", "does not exist", "psycopg", "Error:"):
            assert leak not in response.text, response.text
