"""A follow-up over HTTP, on the real desk: the route event says what was carried, the final trace says it too,
and the session's history shows only the messages (the stored turn context stays inside the desk)."""

from __future__ import annotations

import httpx
import pytest

from routegate.server.testing import ServerThread, parse_sse

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_a_follow_up_over_chat_says_what_it_carried(real_server: ServerThread) -> None:
    with httpx.Client(base_url=real_server.url, timeout=30) as client:
        first = client.post("/chat", json={"message": "status of ticket 3", "session_id": "fu1"})
        assert first.status_code == 200
        events = parse_sse(client.post("/chat", json={"message": "who is the customer?", "session_id": "fu1"}).text)
        route, final = events[0][1], events[-1][1]
        assert events[0][0] == "route" and route["route"] == "POSTGRES"
        assert route["why"].endswith("; follow-up: customer 2, from turn 1")
        assert final["answer"] == "Jane Smith (customer 2) is from London."
        assert {"node": "followup", "carried": "customer 2, from turn 1", "read_as": "Who is customer 2?"} in final[
            "trace"
        ]
        messages = client.get("/sessions/fu1").json()["messages"]
        assert [set(m) for m in messages] == [{"role", "content", "created_at"}] * 4
