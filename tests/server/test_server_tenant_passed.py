"""The server names each request's tenant to the desk (``tenant=``): a turn, a history read and a reset of key A
are A's, of key B B's, whatever the order they come in; without keys, every caller is its client address. A desk
written before the parameter existed is still served (one release), with a warning that says what to add."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi.testclient import TestClient

from routegate.apps.support.contracts import Message, SupportEvent, TurnResult
from routegate.server import create_app
from routegate.server._auth import owner_of
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e

KEY_A, KEY_B = "key-a-tenant-0123456789", "key-b-tenant-0123456789"
JSON = {"Accept": "application/json"}


def test_every_desk_call_names_the_callers_tenant() -> None:
    desk = FakeSupportDesk()
    server = ServerThread(create_app(desk=desk, settings=Settings(server_api_keys=f"{KEY_A},{KEY_B}"))).start()
    try:
        with (
            httpx.Client(base_url=server.url, timeout=10, headers={"Authorization": f"Bearer {KEY_A}"}) as a,
            httpx.Client(base_url=server.url, timeout=10, headers={"Authorization": f"Bearer {KEY_B}"}) as b,
        ):
            assert a.post("/chat", json={"message": "ticket 1", "session_id": "s"}, headers=JSON).status_code == 200
            desk.tenants.clear()
            assert b.post("/chat", json={"message": "ticket 2"}, headers=JSON).status_code == 200
            assert a.get("/sessions/s").status_code == 200
            assert b.delete("/sessions/other").status_code == 204
            assert a.post("/chat", json={"message": "ticket 3", "session_id": "s"}).status_code == 200
    finally:
        server.stop()
    key_a, key_b = f"key:{owner_of(KEY_A)}", f"key:{owner_of(KEY_B)}"
    # B's new session needs no look-up; A's history; B's reset looks A's and B's namespaces up first, as B
    assert desk.tenants == [key_b, key_a, key_b, key_b, key_b, key_a, key_a]


class _OldDesk:
    """A desk of the form before ``tenant=`` existed."""

    def __init__(self) -> None:
        self.inner = FakeSupportDesk()

    def iter(self, message: str, *, session_id: str) -> AsyncIterator[SupportEvent]:
        return self.inner.iter(message, session_id=session_id)

    async def ask(self, message: str, *, session_id: str) -> TurnResult:
        return await self.inner.ask(message, session_id=session_id)

    async def history(self, session_id: str) -> list[Message]:
        return await self.inner.history(session_id)

    async def reset(self, session_id: str) -> None:
        await self.inner.reset(session_id)

    async def healthy(self) -> bool:
        return True


def test_a_desk_without_the_tenant_keyword_is_served_with_a_warning() -> None:
    desk = _OldDesk()
    with pytest.warns(DeprecationWarning, match=r"_OldDesk\.iter/history/reset take no tenant= keyword.*tenant: str"):
        app = create_app(desk=desk, settings=Settings())  # type: ignore[arg-type]  # the old form, on purpose
    server = ServerThread(app).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            turn = client.post("/chat", json={"message": "ticket 1", "session_id": "s"}, headers=JSON)
            assert turn.status_code == 200 and turn.json()["route"] == "POSTGRES"
            assert client.get("/sessions/s").json()["messages"]
            assert client.delete("/sessions/s").status_code == 204
    finally:
        server.stop()
    assert desk.inner.tenants == ["", "", ""]  # the fake's own default: the server named no tenant


def test_a_desk_without_the_tenant_keyword_warns_when_the_app_opens_it() -> None:
    """An app that opens its desk itself (``open_desk=``, as each ``serve --workers N`` worker does) says so too,
    once the desk is open."""
    desk = _OldDesk()

    @contextlib.asynccontextmanager
    async def open_desk() -> AsyncIterator[_OldDesk]:
        yield desk

    app = create_app(open_desk=open_desk, settings=Settings())  # type: ignore[arg-type]  # the old form, on purpose
    with contextlib.ExitStack() as running:
        with pytest.warns(DeprecationWarning, match=r"_OldDesk\.iter/history/reset take no tenant= keyword"):
            client = running.enter_context(TestClient(app))  # the lifespan opens the desk
        turn = client.post("/chat", json={"message": "ticket 1", "session_id": "s"}, headers=JSON)
        assert turn.status_code == 200 and turn.json()["route"] == "POSTGRES"
    assert desk.inner.tenants == [""]  # served without a tenant
