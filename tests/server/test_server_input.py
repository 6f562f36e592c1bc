"""Auth on/off, limits and bad input over real HTTP: 4xx with a clear message, nothing stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e

StartServer = Callable[..., ServerThread]


def _error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert "Traceback" not in response.text
    error: dict[str, Any] = body["error"]
    return error


def _nothing_stored(desk: FakeSupportDesk) -> None:
    assert desk.histories == {}
    assert desk.closed_streams == 0  # the desk was never asked


@pytest.fixture
def keyed(start_server: StartServer) -> ServerThread:
    return start_server(server_api_key="s3cret")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/chat"),
        ("GET", "/sessions/a"),
        ("DELETE", "/sessions/a"),
        ("GET", "/metrics"),
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ],
)
def test_auth_on_protects_everything_but_health(
    keyed: ServerThread, desk: FakeSupportDesk, method: str, path: str
) -> None:
    with httpx.Client(base_url=keyed.url) as c:
        missing = c.request(method, path, json={"message": "hi"})
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert _error(missing)["code"] == "missing_api_key"
        wrong = c.request(method, path, json={"message": "hi"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert _error(wrong)["code"] == "invalid_api_key"
        assert c.get("/healthz").status_code == 200
    _nothing_stored(desk)


def test_auth_on_accepts_the_key(keyed: ServerThread) -> None:
    with httpx.Client(base_url=keyed.url, headers={"Authorization": "Bearer s3cret"}) as c:
        assert c.post("/chat", json={"message": "hi"}, headers={"Accept": "application/json"}).status_code == 200
        assert c.get("/metrics").status_code == 200


def test_auth_off_needs_no_key(client: httpx.Client) -> None:
    assert client.post("/chat", json={"message": "hi"}, headers={"Accept": "application/json"}).status_code == 200
    assert client.get("/v1/models").status_code == 200


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ({"message": ""}, "empty_message", "message is empty"),
        ({"message": "   \n\t"}, "empty_message", "message is empty"),
        ({}, "invalid_request", "message: Field required"),
        ({"message": 42}, "invalid_request", "message: Input should be a valid string"),
        ({"message": ["hi"]}, "invalid_request", "message: Input should be a valid string"),
        ({"message": None}, "invalid_request", "message: Input should be a valid string"),
        ({"message": "hi", "session_id": 7}, "invalid_request", "session_id: Input should be a valid string"),
        ({"message": "hi", "session_id": "../etc"}, "invalid_request", "session_id: String should match pattern"),
        ({"message": "hi", "session_id": "x" * 200}, "invalid_request", "session_id: String should match pattern"),
        ({"message": "hi", "extra": 1}, "invalid_request", "extra: Extra inputs are not permitted"),
        ({"message": "a\x00b"}, "invalid_request", "NUL character"),
        ({"message": "x" * 4001}, "message_too_long", "the message has 4001 characters, over the 4000 limit"),
        ([1, 2], "invalid_request", "Input should be a valid dictionary"),
    ],
)
def test_bad_bodies_are_422(client: httpx.Client, desk: FakeSupportDesk, body: Any, code: str, fragment: str) -> None:
    response = client.post("/chat", json=body)
    assert response.status_code == 422
    error = _error(response)
    assert error["code"] == code
    assert fragment in error["message"]
    _nothing_stored(desk)


def test_lone_surrogate_is_422(client: httpx.Client, desk: FakeSupportDesk) -> None:
    response = client.post("/chat", content=b'{"message": "a\\ud800b"}', headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert "lone surrogate" in _error(response)["message"]
    _nothing_stored(desk)


def test_non_utf8_body_is_400(client: httpx.Client, desk: FakeSupportDesk) -> None:
    raw = b'{"message": "caf\xe9"}'
    response = client.post("/chat", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "invalid_encoding"
    assert error["message"].startswith("the request body is not valid UTF-8 (byte 0xe9 at offset 16)")
    _nothing_stored(desk)


def test_not_json_is_422(client: httpx.Client, desk: FakeSupportDesk) -> None:
    response = client.post("/chat", content=b"{message: hi", headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert _error(response)["message"].startswith("the request body is not valid JSON")
    response = client.post("/chat", content=b"message=hi", headers={"Content-Type": "text/plain"})
    assert response.status_code == 422
    _nothing_stored(desk)


def test_huge_body_is_413(client: httpx.Client, desk: FakeSupportDesk) -> None:
    response = client.post("/chat", json={"message": "x" * 100_000})
    assert response.status_code == 413
    assert _error(response)["message"] == "the request body is 100014 bytes; the limit is 65536 bytes"


def test_huge_chunked_body_is_413(client: httpx.Client, desk: FakeSupportDesk) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}'

    response = client.post("/chat", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "the limit is 65536 bytes" in _error(response)["message"]
    _nothing_stored(desk)


@pytest.mark.parametrize("setting", ["max_message_chars", "server_max_message_chars"])
def test_limits_come_from_settings(start_server: StartServer, desk: FakeSupportDesk, setting: str) -> None:
    # the one message limit (ROUTEGATE_MAX_MESSAGE_CHARS), or its former server-only name
    server = start_server(**{setting: 10}, server_max_request_bytes=2048)
    with httpx.Client(base_url=server.url) as c:
        assert _error(c.post("/chat", json={"message": "x" * 11}))["message"].startswith(
            "the message has 11 characters, over the 10 limit"
        )
        assert c.post("/chat", json={"message": "x" * 3000}).status_code == 413
    _nothing_stored(desk)


# --- property: whatever JSON arrives, the answer is 200 or a clear 4xx, never a 5xx or a traceback -----------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=10,
)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries({"message": _json}),
    st.fixed_dictionaries({"message": st.text(max_size=50)}, optional={"session_id": st.text(max_size=20) | _json}),
)


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[ServerThread, FakeSupportDesk]]:
    desk = FakeSupportDesk()
    with ServerThread(create_app(desk=desk, settings=Settings())) as server:
        yield server, desk


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies)
def test_any_json_body_gets_200_or_a_clear_4xx(shared: tuple[ServerThread, FakeSupportDesk], body: Any) -> None:
    server, desk = shared
    before = {k: list(v) for k, v in desk.histories.items()}
    raw = json.dumps(body).encode()
    with httpx.Client(base_url=server.url, timeout=10) as c:
        response = c.post(
            "/chat", content=raw, headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
    if response.status_code == 200:
        assert isinstance(body, dict)
        assert body["message"].strip()
        return
    assert 400 <= response.status_code < 500
    assert _error(response)["message"]
    assert desk.histories == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200))
def test_any_bytes_get_a_clear_4xx(shared: tuple[ServerThread, FakeSupportDesk], raw: bytes) -> None:
    server, desk = shared
    before = {k: list(v) for k, v in desk.histories.items()}
    with httpx.Client(base_url=server.url, timeout=10) as c:
        response = c.post("/chat", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code in (200, 400, 422)
    if response.status_code != 200:
        assert _error(response)["message"]
        assert desk.histories == before


_roles = st.sampled_from(["user", "assistant", "system", "tool", "bogus"])
_openai_bodies = st.one_of(
    _json,
    st.fixed_dictionaries(
        {
            "model": st.text(max_size=10) | _json,
            "messages": st.lists(
                st.fixed_dictionaries({"role": _roles, "content": st.text(max_size=30) | _json}), max_size=3
            ),
        },
        optional={"stream": st.booleans() | _json, "user": st.text(max_size=10) | _json},
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_openai_bodies)
def test_any_openai_body_gets_200_or_a_clear_4xx(shared: tuple[ServerThread, FakeSupportDesk], body: Any) -> None:
    server, _ = shared
    with httpx.Client(base_url=server.url, timeout=10) as c:
        response = c.post(
            "/v1/chat/completions", content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    if response.status_code != 200:
        assert _error(response)["message"]
