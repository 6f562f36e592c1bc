"""The server around the real support desk (embedded PostgreSQL), over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from routegate.server.testing import ServerThread, parse_sse

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


@pytest.fixture
def client(real_server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=real_server.url, timeout=30) as c:
        yield c


def test_stream_event_order_postgres_route(client: httpx.Client) -> None:
    response = client.post("/chat", json={"message": "What is the status of ticket 1?", "session_id": "r1"})
    assert response.status_code == 200
    events = parse_sse(response.text)
    names = [n for n, _ in events]
    assert names[:2] == ["route", "tool"]
    assert names[-1] == "final"
    assert set(names[2:-1]) == {"token"}
    assert events[0][1]["route"] == "POSTGRES"
    assert events[1][1]["tool"] == "postgres"
    assert events[1][1]["evidence"]["rows"][0]["status"] == "open"
    final = events[-1][1]
    assert final["answer"] == "".join(d["text"] for n, d in events if n == "token")
    assert "Login not working" in final["answer"]
    assert final["stop_reason"] == "success"


def test_llm_route_has_no_tool_event(client: httpx.Client) -> None:
    events = parse_sse(client.post("/chat", json={"message": "What can you do?"}).text)
    names = [n for n, _ in events]
    assert names[0] == "route"
    assert events[0][1]["route"] == "LLM"
    assert "tool" not in names
    assert names[-1] == "final"


def test_json_mode_sessions_and_reset(client: httpx.Client) -> None:
    json_mode = {"Accept": "application/json"}
    first = client.post("/chat", json={"message": "How do I reset my password?"}, headers=json_mode).json()
    sid = first["session_id"]
    assert first["route"] == "VECTOR"
    assert first["decision"]["route"] == "VECTOR"
    assert first["tools"][0]["tool"] == "vector"
    second = client.post("/chat", json={"message": "What's the weather today?", "session_id": sid}, headers=json_mode)
    assert second.json()["route"] == "EXTERNAL"
    history = client.get(f"/sessions/{sid}").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[0]["content"] == "How do I reset my password?"
    assert history[3]["content"] == second.json()["answer"]
    assert client.delete(f"/sessions/{sid}").status_code == 204
    assert client.get(f"/sessions/{sid}").json()["messages"] == []


def test_bad_input_stores_nothing(client: httpx.Client) -> None:
    for body in (
        {"message": "", "session_id": "bad1"},
        {"message": "x" * 5000, "session_id": "bad1"},
        {"message": 5, "session_id": "bad1"},
    ):
        assert client.post("/chat", json=body).status_code == 422
    raw = b'{"message": "caf\xe9", "session_id": "bad1"}'
    assert client.post("/chat", content=raw, headers={"Content-Type": "application/json"}).status_code == 400
    assert client.get("/sessions/bad1").json()["messages"] == []


def test_openai_client_against_the_real_desk(real_server: ServerThread) -> None:
    with openai.OpenAI(base_url=f"{real_server.url}/v1", api_key="unused", max_retries=0, timeout=30) as ai:
        completion = ai.chat.completions.create(
            model="routegate-support",
            messages=[{"role": "user", "content": "Which city is customer 3 from?"}],
            user="oa",
        )
        assert "Toronto" in (completion.choices[0].message.content or "")
        chunks = list(
            ai.chat.completions.create(
                model="routegate-support",
                messages=[{"role": "user", "content": "What is your refund policy?"}],
                stream=True,
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert "14 days" in text
        assert chunks[-1].choices[0].finish_reason == "stop"
