"""Fair sharing between tenants over real HTTP (uvicorn on loopback, the fake desk): a key over its limit on turns
running at once or started per second gets 429 with ``Retry-After`` on every turn endpoint (``/chat`` as JSON and
as a stream, ``/v1/chat/completions`` both ways) while another key is served; without keys, each client address is
a tenant; a turn gives its place back however it ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from routegate.apps.support.contracts import RouteChosen, SupportEvent, TurnError
from routegate.server import create_app
from routegate.server._auth import owner_of
from routegate.server.testing import FakeSupportDesk, ServerThread, parse_sse
from routegate.settings import Settings

KEY_A, KEY_B = "fair-key-a-51c0", "fair-key-b-07de"
JSON = {"Accept": "application/json"}


class HoldingDesk(FakeSupportDesk):
    """The fake desk, except that a turn whose message says "hold" stops after its route event until its client
    leaves (the server then cancels it)."""

    async def _turn(self, message: str, session_id: str) -> AsyncIterator[SupportEvent]:
        async with contextlib.aclosing(super()._turn(message, session_id)) as events:
            async for event in events:
                yield event
                if "hold" in message and isinstance(event, RouteChosen):
                    await asyncio.Event().wait()


@pytest.fixture
def start() -> Iterator[Callable[..., tuple[ServerThread, HoldingDesk]]]:
    started: list[ServerThread] = []

    def run(**settings: Any) -> tuple[ServerThread, HoldingDesk]:
        desk = HoldingDesk()
        server = ServerThread(create_app(desk=desk, settings=Settings(**settings))).start()
        started.append(server)
        return server, desk

    yield run
    for server in started:
        server.stop()


def _client(server: ServerThread, key: str | None = None, *, address: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    transport = httpx.HTTPTransport(local_address=address) if address else None
    return httpx.Client(base_url=server.url, timeout=10, headers=headers, transport=transport)


def _turns(message: str) -> list[tuple[str, str, dict[str, Any], dict[str, str]]]:
    """One turn per way of asking: (method, path, body, headers)."""
    openai = {"model": "m", "messages": [{"role": "user", "content": message}]}
    return [
        ("POST", "/chat", {"message": message}, JSON),
        ("POST", "/chat", {"message": message}, {}),
        ("POST", "/v1/chat/completions", openai, {}),
        ("POST", "/v1/chat/completions", {**openai, "stream": True}, {}),
    ]


def _hold(stack: contextlib.ExitStack, client: httpx.Client, message: str = "hold ticket 1") -> None:
    """A streamed turn that stays running (its route event read) until ``stack`` closes."""
    response = stack.enter_context(client.stream("POST", "/chat", json={"message": message}))
    assert response.status_code == 200
    lines = response.iter_lines()
    stack.callback(lines.close)  # kept alive until then: a reader collected early closes the response
    for line in lines:
        if line.startswith("event: route"):
            return
    pytest.fail("the held turn ended")


def _assert_429(response: httpx.Response, code: str, retry_after: str) -> None:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == retry_after
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert response.json()["error"]["code"] == code


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.02)


def test_a_key_over_its_concurrent_turns_gets_429_on_every_endpoint_while_another_key_is_served(
    start: Callable[..., tuple[ServerThread, HoldingDesk]],
) -> None:
    server, _ = start(server_api_keys=f"{KEY_A},{KEY_B}", tenant_max_concurrent_turns=2)
    limiter = server.app.state.services.limiter
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        with contextlib.ExitStack() as held:
            _hold(held, a)
            _hold(held, a)
            for method, path, body, headers in _turns("What is the status of ticket 1?"):
                response = a.request(method, path, json=body, headers=headers)
                _assert_429(response, "too_many_concurrent_turns", "1")
                assert "2 turns running" in response.json()["error"]["message"]
            answer = b.post("/chat", json={"message": "What is the status of ticket 1?"}, headers=JSON)
            assert answer.status_code == 200
            assert answer.json()["answer"] == "[POSTGRES] answer to: What is the status of ticket 1?"
            assert limiter.running(f"key:{owner_of(KEY_A)}") == 2
        # the clients left: their turns end and give their places back
        _wait_for(lambda: limiter.running(f"key:{owner_of(KEY_A)}") == 0, "A's held turns ending")
        for method, path, body, headers in _turns("What is the status of ticket 2?"):
            assert a.request(method, path, json=body, headers=headers).status_code == 200
        metrics = a.get("/metrics").text
    assert 'routegate_tenant_refusals_total{code="too_many_concurrent_turns"} 4.0' in metrics


def test_a_key_over_its_rate_gets_429_with_the_wait_and_another_key_is_not(
    start: Callable[..., tuple[ServerThread, HoldingDesk]],
) -> None:
    server, desk = start(server_api_keys=f"{KEY_A},{KEY_B}", tenant_rate_per_second=0.01, tenant_rate_burst=4)
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        for method, path, body, headers in _turns("How do I reset my password?"):  # the burst: four turns
            assert a.request(method, path, json=body, headers=headers).status_code == 200
        for method, path, body, headers in _turns("How do I reset my password?"):
            response = a.request(method, path, json=body, headers=headers)
            _assert_429(response, "rate_limited", "100")  # one turn per 100 s
            assert "faster than 0.01 per second (burst 4)" in response.json()["error"]["message"]
        assert b.post("/chat", json={"message": "weather today?"}, headers=JSON).status_code == 200
    assert len(desk.histories) == 5  # the refused turns never reached the desk


def test_without_keys_each_client_address_is_a_tenant(
    start: Callable[..., tuple[ServerThread, HoldingDesk]],
) -> None:
    server, _ = start(tenant_max_concurrent_turns=1)
    with _client(server) as here, _client(server, address="127.0.0.2") as there, contextlib.ExitStack() as held:
        _hold(held, here)
        _assert_429(here.post("/chat", json={"message": "ticket 1"}, headers=JSON), "too_many_concurrent_turns", "1")
        assert "this client address" in here.post("/chat", json={"message": "x"}, headers=JSON).text
        response = there.post("/chat", json={"message": "ticket 1"}, headers=JSON)
        assert response.status_code == 200, response.text


def test_a_turn_gives_its_place_back_however_it_ends(
    start: Callable[..., tuple[ServerThread, HoldingDesk]],
) -> None:
    """With one turn allowed at a time, each way a turn can end is followed by a turn that is admitted."""
    server, desk = start(server_api_keys=f"{KEY_A},{KEY_B}", tenant_max_concurrent_turns=1)
    ok = {"message": "ticket 1"}
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        assert b.post("/chat", json={"message": "ticket 1", "session_id": "bs"}, headers=JSON).status_code == 200
        endings: list[Callable[[], int]] = [
            lambda: a.post("/chat", json={"message": "ticket 1", "session_id": "bs"}, headers=JSON).status_code,
            lambda: a.post("/chat", json={"message": " "}, headers=JSON).status_code,
            lambda: (
                a.post(
                    "/v1/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "x"}], "user": "bs"},
                ).status_code
            ),
        ]
        assert [ending() for ending in endings] == [404, 422, 404]
        assert a.post("/chat", json=ok, headers=JSON).status_code == 200
        desk.database_up = False
        for method, path, body, headers in _turns("ticket 1"):
            assert a.request(method, path, json=body, headers=headers).status_code == 503
        desk.database_up = True
        assert a.get("/healthz").status_code == 200
        desk.fault = RuntimeError("a desk bug")
        for method, path, body, headers in _turns("ticket 1"):
            response = a.request(method, path, json=body, headers=headers)
            assert response.status_code in (200, 500)  # a stream that ends in an error event, or a 500
        desk.fault = None
        with a.stream("POST", "/chat", json=ok) as response:  # a stream read to its end
            assert parse_sse(response.read().decode())[-1][0] == "final"
        for method, path, body, headers in _turns("ticket 2"):
            assert a.request(method, path, json=body, headers=headers).status_code == 200
    assert server.app.state.services.limiter.running(f"key:{owner_of(KEY_A)}") == 0


def test_a_turn_that_reports_the_database_down_does_not_fail_the_others_while_it_answers(
    start: Callable[..., tuple[ServerThread, HoldingDesk]],
) -> None:
    """Whether the database is down is the health check's word alone: a turn whose desk says ``database_unavailable``
    (a pool timeout under one tenant's load) or ``server_busy`` is a 503 for that turn only, and the next turn of
    any key runs (before, the first made every turn fail fast for a second)."""
    server, desk = start(server_api_keys=f"{KEY_A},{KEY_B}")
    with _client(server, KEY_A) as a, _client(server, KEY_B) as b:
        for code, words in [
            ("database_unavailable", "the database is unavailable"),
            ("server_busy", "the server is at capacity"),
        ]:
            desk.fault_event = TurnError(message="PoolTimeout: couldn't get a connection after 3.00 sec", code=code)
            failed = a.post("/chat", json={"message": "ticket 1"}, headers=JSON)
            desk.fault_event = None
            assert failed.status_code == 503
            assert failed.headers["retry-after"] == "5"
            assert failed.json()["error"]["code"] == code
            assert failed.json()["error"]["message"].startswith(words)
            assert "PoolTimeout" not in failed.text
            assert not server.app.state.services.database.down
            assert b.post("/chat", json={"message": "ticket 1"}, headers=JSON).status_code == 200
        desk.database_up = False  # and when the health check agrees, the database is down for everyone
        assert a.post("/chat", json={"message": "ticket 1"}, headers=JSON).status_code == 503
        assert server.app.state.services.database.down
        response = b.post("/chat", json={"message": "ticket 1"}, headers=JSON)
        assert response.json()["error"]["code"] == "database_unavailable"


class LaggingDesk(HoldingDesk):
    """A desk whose health check blocks the event loop (as a flood of requests to answer does), or hangs."""

    block_seconds = 0.0
    hang = False

    async def healthy(self) -> bool:
        if self.hang:
            await asyncio.Event().wait()
        if self.block_seconds:
            time.sleep(self.block_seconds)  # noqa: ASYNC251 - on purpose: the loop is behind, nothing else runs
            await asyncio.sleep(0.05)  # then the database answers; the overdue timeout fires first
        return await super().healthy()


def test_a_health_check_late_because_the_server_is_busy_does_not_mark_the_database_down() -> None:
    desk = LaggingDesk()
    app = create_app(desk=desk, settings=Settings(server_health_timeout_seconds=0.2))
    with ServerThread(app) as server, _client(server) as c:
        desk.block_seconds = 1.0  # its timeout fires 0.8 s late: the loop was behind, not the database
        assert c.get("/healthz").status_code == 200
        assert not app.state.services.database.down
        desk.block_seconds, desk.hang = 0.0, True  # a check that hangs with the loop free: the database is down
        assert c.get("/healthz").status_code == 503
        assert app.state.services.database.down
