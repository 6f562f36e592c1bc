"""POST /chat over real HTTP: SSE event order, JSON mode, sessions, health, docs."""

from __future__ import annotations

import httpx
import pytest

from routegate.server.testing import FakeSupportDesk, ServerThread, parse_sse

pytestmark = pytest.mark.e2e


def _names(events: list[tuple[str, object]]) -> list[str]:
    return [name for name, _ in events]


def test_stream_events_arrive_in_order(client: httpx.Client) -> None:
    response = client.post("/chat", json={"message": "What is the status of ticket 12?", "session_id": "s1"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-session-id"] == "s1"
    events = parse_sse(response.text)
    names = _names(events)
    assert names[:2] == ["route", "tool"]
    assert names[-1] == "final"
    assert set(names[2:-1]) == {"token"}
    route, tool, final = events[0][1], events[1][1], events[-1][1]
    assert route == {
        "session_id": "s1",
        "route": "POSTGRES",
        "layer": "rules",
        "scores": {"POSTGRES": 1.0},
        "why": "keyword match",
    }
    assert tool["tool"] == "postgres"
    assert tool["ok"] is True
    assert tool["summary"] == "1 row"
    streamed = "".join(data["text"] for name, data in events if name == "token")
    assert final["answer"] == streamed
    assert final["session_id"] == "s1"
    assert final["stop_reason"] == "success"
    assert final["fallback"] is None
    assert final["latency_ms"] >= 0


def test_llm_route_has_no_tool_event(client: httpx.Client) -> None:
    events = parse_sse(client.post("/chat", json={"message": "Can you help me?"}).text)
    names = _names(events)
    assert names[0] == "route"
    assert "tool" not in names
    assert names[-1] == "final"
    assert events[0][1]["route"] == "LLM"


def test_fallback_is_reported(client: httpx.Client) -> None:
    events = parse_sse(client.post("/chat", json={"message": "customer nothing"}).text)
    final = events[-1][1]
    assert final["fallback"] == "empty: postgres returned no data"
    assert events[1][1]["ok"] is False


def test_json_mode_gives_one_body(client: httpx.Client) -> None:
    response = client.post(
        "/chat", json={"message": "How do I reset my password?"}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["route"] == "VECTOR"
    assert body["answer"] == "[VECTOR] answer to: How do I reset my password?"
    assert body["decision"] == {"route": "VECTOR", "layer": "rules", "scores": {"VECTOR": 1.0}, "why": "keyword match"}
    assert [t["tool"] for t in body["tools"]] == ["vector"]
    assert body["session_id"] == response.headers["x-session-id"]
    assert len(body["session_id"]) == 32


def test_event_stream_wins_when_both_are_accepted(client: httpx.Client) -> None:
    response = client.post("/chat", json={"message": "hi"}, headers={"Accept": "text/event-stream, application/json"})
    assert response.headers["content-type"].startswith("text/event-stream")


def test_sessions_keep_history_in_order_and_reset(client: httpx.Client) -> None:
    json_mode = {"Accept": "application/json"}
    first = client.post("/chat", json={"message": "weather today?"}, headers=json_mode).json()
    sid = first["session_id"]
    client.post("/chat", json={"message": "bitcoin price?", "session_id": sid}, headers=json_mode)
    history = client.get(f"/sessions/{sid}").json()
    assert history["session_id"] == sid
    assert [(m["role"], m["content"]) for m in history["messages"]] == [
        ("user", "weather today?"),
        ("assistant", "[EXTERNAL] answer to: weather today?"),
        ("user", "bitcoin price?"),
        ("assistant", "[EXTERNAL] answer to: bitcoin price?"),
    ]
    assert client.delete(f"/sessions/{sid}").status_code == 204
    assert client.get(f"/sessions/{sid}").json()["messages"] == []


def test_unknown_session_is_empty(client: httpx.Client) -> None:
    assert client.get("/sessions/never-seen").json() == {"session_id": "never-seen", "messages": []}


def test_bad_session_id_in_path_is_422(client: httpx.Client) -> None:
    response = client.get("/sessions/-bad id")
    assert response.status_code == 422
    assert "session_id" in response.json()["error"]["message"]


def test_healthz(client: httpx.Client, desk: FakeSupportDesk) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok", "detail": ""}
    desk.database_up = False
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"] == "unavailable"


def test_openapi_docs(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    for path in ("/chat", "/sessions/{session_id}", "/healthz", "/metrics", "/v1/chat/completions", "/v1/models"):
        assert path in spec["paths"]
    assert "ChatResponse" in spec["components"]["schemas"]
    assert client.get("/docs").status_code == 200


def test_unknown_endpoint_is_a_clear_404(client: httpx.Client) -> None:
    response = client.get("/nope")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "no such endpoint: GET /nope"
    response = client.put("/chat", json={})
    assert response.status_code == 405


def test_database_down_gives_503_then_recovers(client: httpx.Client, desk: FakeSupportDesk) -> None:
    desk.database_up = False
    for headers in ({}, {"Accept": "application/json"}):
        response = client.post("/chat", json={"message": "ticket 1", "session_id": "d"}, headers=headers)
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.json()["error"]["code"] == "database_unavailable"
        assert "database is unavailable" in response.json()["error"]["message"]
    assert client.get("/sessions/d").status_code == 503
    desk.database_up = True
    assert client.get("/healthz").status_code == 200  # a health check clears the outage at once
    assert client.post("/chat", json={"message": "ticket 1", "session_id": "d"}).status_code == 200
    assert len(client.get("/sessions/d").json()["messages"]) == 2


def test_desk_raising_when_database_is_down_is_503(client: httpx.Client, desk: FakeSupportDesk) -> None:
    desk.database_up = False
    desk.raise_when_down = True
    response = client.post("/chat", json={"message": "ticket 1"})
    assert response.status_code == 503
    assert "Traceback" not in response.text
    assert response.json()["error"]["code"] == "database_unavailable"


def test_cors_when_configured(start_server: object) -> None:
    server: ServerThread = start_server(server_cors_origins=["http://ui.example"])  # type: ignore[operator]
    with httpx.Client(base_url=server.url) as c:
        preflight = c.options(
            "/chat",
            headers={"Origin": "http://ui.example", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.headers["access-control-allow-origin"] == "http://ui.example"
        other = c.options("/chat", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in other.headers
