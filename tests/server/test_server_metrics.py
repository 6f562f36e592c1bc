"""GET /metrics: Prometheus text with requests, latency histograms, routes, stop reasons, fallbacks."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_turns_routes_stops_and_fallbacks(client: httpx.Client) -> None:
    json_mode = {"Accept": "application/json"}
    client.post("/chat", json={"message": "ticket 1"}, headers=json_mode)
    client.post("/chat", json={"message": "customer nothing"})
    client.post("/chat", json={"message": ""})
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    s = _samples(response.text)
    assert s[("routegate_routes_chosen_total", (("layer", "rules"), ("route", "POSTGRES")))] == 2
    assert s[("routegate_stop_reasons_total", (("stop_reason", "success"),))] == 2
    assert s[("routegate_fallbacks_total", (("reason", "empty"), ("route", "POSTGRES")))] == 1
    assert s[("routegate_chat_turns_total", (("endpoint", "chat"), ("mode", "json")))] == 1
    assert s[("routegate_chat_turns_total", (("endpoint", "chat"), ("mode", "stream")))] == 1
    assert s[("routegate_http_requests_total", (("method", "POST"), ("path", "/chat"), ("status", "200")))] == 2
    assert s[("routegate_http_requests_total", (("method", "POST"), ("path", "/chat"), ("status", "422")))] == 1
    assert s[("routegate_http_request_duration_seconds_count", (("method", "POST"), ("path", "/chat")))] == 3
    assert s[("routegate_chat_turn_duration_seconds_count", (("route", "POSTGRES"),))] == 2


def test_session_paths_are_templated(client: httpx.Client) -> None:
    client.get("/sessions/abc")
    client.get("/sessions/def")
    s = _samples(client.get("/metrics").text)
    key = ("routegate_http_requests_total", (("method", "GET"), ("path", "/sessions/{session_id}"), ("status", "200")))
    assert s[key] == 2


def test_database_errors_are_counted(client: httpx.Client, desk: object) -> None:
    desk.database_up = False  # type: ignore[attr-defined]
    client.post("/chat", json={"message": "ticket 1"})
    s = _samples(client.get("/metrics").text)
    assert s[("routegate_turn_errors_total", (("code", "database_unavailable"),))] == 1
