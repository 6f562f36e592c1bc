"""Bounded loopback load and fault tests against the real desk on embedded PostgreSQL: concurrent sessions
keep complete, ordered, unmixed histories; the database going away mid-run gives clear 503s and the service
recovers; clients leaving mid-stream leave no task or pooled connection behind."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import httpx
import psycopg
import pytest

from routegate.apps.support.db import EmbeddedPostgres
from routegate.server.testing import ServerThread, parse_sse

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SESSIONS = 50
MESSAGES = 10
QUESTIONS = (
    "What is the status of ticket {n}?",
    "How do I reset my password?",
    "What's the weather today?",
    "Which city is customer {n} from?",
    "Can you help me?",
)


def _message(session: int, i: int) -> str:
    return QUESTIONS[(session + i) % len(QUESTIONS)].format(n=i % 3 + 1) + f" [s{session} m{i}]"


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)


async def test_concurrent_sessions_keep_complete_ordered_unmixed_histories(
    start_real_server: Callable[..., ServerThread], pg_url: str
) -> None:
    server = start_real_server()
    # The client drops an idle connection before the server's keep-alive timeout (5 s) does: with both at 5 s
    # (httpx's default) a request sent on a connection the server is closing at that instant fails with ReadError.
    limits = httpx.Limits(max_connections=SESSIONS, max_keepalive_connections=SESSIONS, keepalive_expiry=2.0)
    async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as client:

        async def session(k: int) -> list[tuple[str, str]]:
            turns = []
            for i in range(MESSAGES):
                body = {"message": _message(k, i), "session_id": f"load-{k}"}
                if i % 2:  # half streamed, half JSON
                    async with client.stream("POST", "/chat", json=body) as response:
                        assert response.status_code == 200
                        events = parse_sse((await response.aread()).decode())
                    assert events[-1][0] == "final"
                    final = events[-1][1]
                else:
                    response = await client.post("/chat", json=body, headers={"Accept": "application/json"})
                    assert response.status_code == 200, response.text
                    final = response.json()
                assert final["session_id"] == f"load-{k}"
                turns.append((body["message"], final["answer"]))
            return turns

        results = await asyncio.gather(*(session(k) for k in range(SESSIONS)))
        assert all(len(turns) == MESSAGES for turns in results)
        # the API gives the memory window (the last 10 messages = 5 turns), in order, this session's own
        for k in range(SESSIONS):
            history = (await client.get(f"/sessions/load-{k}")).json()["messages"]
            expected = [text for turn in results[k][-5:] for text in turn]
            assert [m["role"] for m in history] == ["user", "assistant"] * 5
            assert [m["content"] for m in history] == expected

    # the table holds each session's window, in insertion order, none mixed (the desk trims older rows)
    schema = server.app.state.services.desk.db.schema
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f"SELECT session_id, content FROM {schema}.support_messages WHERE session_id LIKE 'load-%%' ORDER BY id"
        )
        rows = await cursor.fetchall()
    by_session: dict[str, list[str]] = {}
    for sid, content in rows:
        by_session.setdefault(sid, []).append(content)
    assert len(by_session) == SESSIONS
    for k in range(SESSIONS):
        assert by_session[f"load-{k}"] == [text for turn in results[k][-5:] for text in turn]


def test_database_down_mid_run_gives_503_then_recovers(
    start_real_server: Callable[..., ServerThread], own_pg: EmbeddedPostgres
) -> None:
    url = own_pg.start()  # attach: the running server's URL
    server = start_real_server(database_url=url)
    json_mode = {"Accept": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for i in range(3):
            assert (
                c.post(
                    "/chat", json={"message": f"ticket {i + 1} status", "session_id": "f"}, headers=json_mode
                ).status_code
                == 200
            )

        own_pg.stop()
        for headers in (json_mode, {}):
            response = c.post("/chat", json={"message": "ticket 1 status", "session_id": "f"}, headers=headers)
            assert response.status_code == 503, response.text
            error = response.json()["error"]
            assert error["code"] == "database_unavailable"
            assert error["message"].startswith("the database is unavailable")
            assert response.headers["retry-after"] == "5"
        assert c.get("/sessions/f").status_code == 503
        assert c.get("/healthz").status_code == 503

        assert own_pg.start() == url
        wait_until(lambda: c.get("/healthz").status_code == 200, timeout=30, what="health after the restart")
        ok = c.post("/chat", json={"message": "ticket 2 status", "session_id": "f"}, headers=json_mode)
        assert ok.status_code == 200
        history = c.get("/sessions/f").json()["messages"]
        assert [m["content"] for m in history[::2]] == [
            "ticket 1 status",
            "ticket 2 status",
            "ticket 3 status",
            "ticket 2 status",
        ]


def test_database_down_under_concurrent_load(
    start_real_server: Callable[..., ServerThread], own_pg: EmbeddedPostgres
) -> None:
    """Clients keep talking while PostgreSQL stops and comes back: every answer is a 200 or a clear 503, none
    hangs or is a 500, and the turns succeed again once the database is back."""
    url = own_pg.start()
    server = start_real_server(database_url=url)
    stop = threading.Event()
    lock = threading.Lock()
    seen: list[tuple[int, str]] = []

    def client(k: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            i = 0
            while not stop.is_set():
                body = {"message": _message(k, i), "session_id": f"burst-{k}"}
                headers = {"Accept": "application/json"} if i % 2 else {}
                response = c.post("/chat", json=body, headers=headers)
                code = response.json()["error"]["code"] if response.status_code != 200 else ""
                with lock:
                    seen.append((response.status_code, code))
                i += 1

    def count(status: int) -> int:
        with lock:
            return sum(1 for s, _ in seen if s == status)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: count(200) >= 8, timeout=30, what="8 answers before the outage")
        own_pg.stop()
        wait_until(lambda: count(503) >= 8, timeout=30, what="8 clear 503s during the outage")
        assert own_pg.start() == url
        before = count(200)
        wait_until(lambda: count(200) >= before + 8, timeout=30, what="8 answers after the restart")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert {status for status, _ in seen} <= {200, 503}, seen
    assert {code for status, code in seen if status == 503} == {"database_unavailable"}


def test_clients_leaving_mid_stream_leak_nothing(real_server: ServerThread) -> None:
    baseline = real_server.tasks()
    desk = real_server.app.state.services.desk
    for i in range(10):
        with (
            httpx.Client(base_url=real_server.url, timeout=30) as c,
            c.stream("POST", "/chat", json={"message": "How do I reset my password?", "session_id": f"gone-{i}"}) as r,
        ):
            assert r.status_code == 200
            next(r.iter_lines())  # the first line of the route event, then hang up
    wait_until(lambda: real_server.tasks() <= baseline, timeout=20, what="the server's task count back at its baseline")

    def pool_whole() -> bool:  # psycopg_pool: every connection back, or replaced (a query cut off by the client
        stats = desk.db._pool.get_stats()  # leaving mid-flight closes its connection; the pool opens another)
        return stats.get("pool_size", 0) >= 1 and stats.get("pool_available", 0) == stats.get("pool_size", 0)

    wait_until(pool_whole, timeout=20, what="every pooled connection back in the pool")
    assert len(real_server.app.state.services.locks) == 0
    with httpx.Client(base_url=real_server.url, timeout=30) as c:
        assert c.get("/healthz").status_code == 200
