"""Per-key tenants with the fake desk: two keys never see or write each other's sessions, on any endpoint; keys are
compared in constant time and never logged. (The same against PostgreSQL: test_server_tenants_real_desk.py.)"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.server._auth import KeyRing, owner_of
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e

StartServer = Callable[..., ServerThread]
KEY_A, KEY_B, KEY_OLD = "key-a-1f0c9e", "key-b-77d2a4", "single-key-5b1e"
JSON = {"Accept": "application/json"}


@pytest.fixture
def tenants(start_server: StartServer) -> ServerThread:
    return start_server(server_api_keys=f"{KEY_A}, {KEY_B}", server_api_key=KEY_OLD)


@pytest.fixture
def a(tenants: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tenants.url, timeout=10, headers={"Authorization": f"Bearer {KEY_A}"}) as c:
        yield c


@pytest.fixture
def b(tenants: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tenants.url, timeout=10, headers={"Authorization": f"Bearer {KEY_B}"}) as c:
        yield c


def _openai(content: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def _not_found(response: httpx.Response, session_id: str) -> None:
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "session_not_found"
    assert error["message"] == (
        f"no session '{session_id}' for this API key; omit the session id to start a new session"
    )


def test_another_key_gets_404_for_a_session_on_every_endpoint(
    a: httpx.Client, b: httpx.Client, desk: FakeSupportDesk
) -> None:
    assert a.post("/chat", json={"message": "ticket 1", "session_id": "s1"}, headers=JSON).status_code == 200
    before = a.get("/sessions/s1").json()["messages"]
    assert len(before) == 2

    _not_found(b.get("/sessions/s1"), "s1")
    _not_found(b.delete("/sessions/s1"), "s1")
    _not_found(b.post("/chat", json={"message": "mine now", "session_id": "s1"}, headers=JSON), "s1")
    _not_found(b.post("/chat", json={"message": "mine now", "session_id": "s1"}), "s1")  # stream mode too
    _not_found(b.post("/v1/chat/completions", json=_openai("mine now", user="s1")), "s1")
    _not_found(b.post("/v1/chat/completions", json=_openai("mine now", user="s1", stream=True)), "s1")
    _not_found(b.post("/v1/chat/completions", json=_openai("mine now"), headers={"X-Session-Id": "s1"}), "s1")

    assert a.get("/sessions/s1").json()["messages"] == before  # untouched, not deleted
    assert set(desk.histories) == {f"{owner_of(KEY_A)}:s1"}  # B's turns landed nowhere
    assert all("mine now" not in m.content for h in desk.histories.values() for m in h)


def test_each_key_has_its_own_sessions_under_the_same_id(a: httpx.Client, b: httpx.Client) -> None:
    """Both keys start "shared" at the same time (neither had it): two conversations, never one."""
    assert b.post("/chat", json={"message": "from b", "session_id": "b-only"}, headers=JSON).status_code == 200
    first = a.post("/v1/chat/completions", json=_openai("from a", user="mine")).json()
    assert first["routegate"]["session_id"] == "mine"  # the id the client sent, never the stored one
    a_chat = a.post("/chat", json={"message": "again a", "session_id": "mine"}, headers=JSON).json()
    assert a_chat["session_id"] == "mine"
    _not_found(b.get("/sessions/mine"), "mine")
    _not_found(a.get("/sessions/b-only"), "b-only")
    assert [m["content"] for m in a.get("/sessions/mine").json()["messages"] if m["role"] == "user"] == [
        "from a",
        "again a",
    ]


def test_sessions_without_a_session_id_are_new_and_owned(a: httpx.Client, b: httpx.Client) -> None:
    reply = a.post("/chat", json={"message": "ticket 1"}, headers=JSON)
    sid = reply.json()["session_id"]
    assert reply.headers["x-session-id"] == sid
    assert a.get(f"/sessions/{sid}").status_code == 200
    _not_found(b.get(f"/sessions/{sid}"), sid)


def test_unknown_sessions_with_keys(a: httpx.Client) -> None:
    _not_found(a.get("/sessions/never-used"), "never-used")
    assert a.delete("/sessions/never-used").status_code == 204  # idempotent: the UI's Reset of a fresh session
    assert a.post("/chat", json={"message": "hi", "session_id": "never-used"}, headers=JSON).status_code == 200


def test_delete_removes_only_the_owners_session(a: httpx.Client, b: httpx.Client, desk: FakeSupportDesk) -> None:
    a.post("/chat", json={"message": "a", "session_id": "x1"}, headers=JSON)
    b.post("/chat", json={"message": "b", "session_id": "x2"}, headers=JSON)
    assert a.delete("/sessions/x1").status_code == 204
    _not_found(a.get("/sessions/x1"), "x1")
    assert len(b.get("/sessions/x2").json()["messages"]) == 2
    assert set(desk.histories) == {f"{owner_of(KEY_B)}:x2"}


def test_the_single_key_setting_keeps_working(tenants: ServerThread) -> None:
    with httpx.Client(base_url=tenants.url, headers={"Authorization": f"Bearer {KEY_OLD}"}) as old:
        assert old.post("/chat", json={"message": "hi", "session_id": "o1"}, headers=JSON).status_code == 200
        assert old.get("/sessions/o1").status_code == 200


@pytest.mark.parametrize("presented", ["key-a", f"{KEY_A}x", KEY_A.upper(), f"{KEY_A},{KEY_B}", f"{KEY_A} {KEY_B}"])
def test_a_bad_key_is_401(tenants: ServerThread, desk: FakeSupportDesk, presented: str) -> None:
    with httpx.Client(base_url=tenants.url, headers={"Authorization": f"Bearer {presented}"}) as c:
        for method, path in [("POST", "/chat"), ("GET", "/sessions/s1"), ("POST", "/v1/chat/completions")]:
            response = c.request(method, path, json={"message": "hi", **_openai("hi")})
            assert response.status_code == 401
            assert response.json()["error"]["code"] in ("invalid_api_key", "missing_api_key")
    assert desk.histories == {}


def test_keys_are_compared_with_compare_digest_against_every_key(
    tenants: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(x: Any, y: Any) -> bool:
        calls.append((x, y))
        return real(x, y)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    with httpx.Client(base_url=tenants.url) as c:
        for presented in (KEY_A, "wrong", KEY_OLD):
            calls.clear()
            c.get("/v1/models", headers={"Authorization": f"Bearer {presented}"})
            assert len(calls) == 3  # every configured key, whichever matched
            assert all(len(x) == len(y) == 32 for x, y in calls)  # digests: the time does not depend on the length
            assert all(presented.encode() not in x for x, _ in calls)


def test_no_key_appears_in_the_logs(tenants: ServerThread, caplog: pytest.LogCaptureFixture) -> None:
    names = ["", "routegate", "uvicorn", "uvicorn.error", "uvicorn.access", "fastapi", "httpx"]
    isolated = [logging.getLogger(n) for n in names if n and not logging.getLogger(n).propagate]
    for name in names:
        caplog.set_level(logging.DEBUG, logger=name)
    for logger in isolated:  # uvicorn's own loggers do not reach the root handler
        logger.addHandler(caplog.handler)
    wrong = "wrong-key-9d8e7f"
    try:
        for key in (KEY_A, KEY_B, KEY_OLD, wrong):
            with httpx.Client(base_url=tenants.url, headers={"Authorization": f"Bearer {key}"}) as c:
                c.post("/chat", json={"message": "ticket 1", "session_id": "s1"}, headers=JSON)
                c.post("/chat", json={"message": "ticket 1", "session_id": "s1"})
                c.get("/sessions/s1")
                c.get("/sessions/nobody")
                c.post("/v1/chat/completions", json=_openai("hi", user="s1"))
    finally:
        for logger in isolated:
            logger.removeHandler(caplog.handler)
    assert caplog.records  # something was logged at DEBUG (httpx at least), so the check below means something
    text = caplog.text + "".join(str(r.__dict__) for r in caplog.records)
    for key in (KEY_A, KEY_B, KEY_OLD, wrong):
        assert key not in text


def test_without_keys_nothing_changes(client: httpx.Client, desk: FakeSupportDesk) -> None:
    assert client.get("/sessions/unknown").json() == {"session_id": "unknown", "messages": []}
    client.post("/chat", json={"message": "hi", "session_id": "plain"}, headers=JSON)
    assert set(desk.histories) == {"plain"}


def test_keys_come_comma_separated_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_SERVER_API_KEYS", f" {KEY_A},{KEY_B} ,,{KEY_A}")
    monkeypatch.setenv("ROUTEGATE_SERVER_API_KEY", KEY_OLD)
    settings = Settings()
    assert settings.server_keys == (KEY_OLD, KEY_A, KEY_B)  # the single key first: the UI sends that one
    assert settings.server_auth_enabled
    assert KEY_A not in repr(settings)
    monkeypatch.setenv("ROUTEGATE_SERVER_API_KEYS", " , ")
    monkeypatch.delenv("ROUTEGATE_SERVER_API_KEY")
    assert not Settings().server_auth_enabled


@given(
    keys=st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=1, max_size=4),
    presented=st.text(max_size=24),
)
def test_a_key_identifies_only_its_own_owner(keys: list[str], presented: str) -> None:
    ring = KeyRing(keys)
    caller = ring.identify(presented)
    if presented in keys:
        assert caller is not None
        assert caller.owner == owner_of(presented)
        assert caller.session("s").internal == f"{owner_of(presented)}:s"
    else:
        assert caller is None
