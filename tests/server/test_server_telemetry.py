"""The server's OpenTelemetry: when export is on, request spans (continuing a caller's ``traceparent``),
``X-Request-Id`` on every answer, JSON log lines with trace ids, and — end to end — ``routegate serve`` exporting
OTLP/HTTP to a loopback collector started by the test."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from routegate.core import telemetry
from routegate.errors import ConfigurationError
from routegate.server import telemetry as server_telemetry
from routegate.server._logs import JsonFormatter, log_config
from routegate.server.testing import free_port
from routegate.settings import Settings
from server.conftest import StartServer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, False),
    ],
)
def test_export_is_on_only_when_an_endpoint_is_set(env: dict[str, str], wanted: bool) -> None:
    assert server_telemetry.export_requested(env) is wanted


def test_a_grpc_protocol_is_refused_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ConfigurationError, match="http/protobuf"):
        server_telemetry.configure_tracing()


def test_every_answer_has_a_request_id(start_server: StartServer) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        fresh = client.get("/healthz").headers["x-request-id"]
        assert len(fresh) == 32 and int(fresh, 16) >= 0
        assert client.get("/healthz", headers={"X-Request-Id": "abc-123"}).headers["x-request-id"] == "abc-123"
        hostile = client.get("/healthz", headers={"X-Request-Id": "a" * 500}).headers["x-request-id"]
        assert hostile != "a" * 500 and len(hostile) == 32  # not echoed: a fresh id instead


def test_a_request_span_continues_the_callers_trace(
    start_server: StartServer, otel_spans: InMemorySpanExporter
) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        response = client.post(
            "/chat",
            json={"message": "How do I reset my password?", "session_id": "s1"},
            headers={"Accept": "application/json", "traceparent": TRACEPARENT},
        )
    server.stop()  # the span ends after the answer's last byte: stopping waits for the request's task to end
    assert response.status_code == 200
    assert response.headers["x-request-id"] == TRACE_ID
    served = [s for s in otel_spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert served, [s.name for s in otel_spans.get_finished_spans()]
    assert {format(s.context.trace_id, "032x") for s in served} == {TRACE_ID}
    assert any(s.name == "POST /chat" for s in served)


def test_a_streamed_answer_is_one_server_span(start_server: StartServer, otel_spans: InMemorySpanExporter) -> None:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        response = client.post(
            "/chat",
            json={"message": "How do I reset my password?", "session_id": "s1"},
            headers={"Accept": "text/event-stream"},
        )
    server.stop()  # the span ends after the answer's last byte: stopping waits for the request's task to end
    assert response.status_code == 200 and response.text.count("data:") > 2  # several server-sent events
    # no `http send` span per event (nor `http receive`): the request is one span, whatever it streams
    assert [(s.name, s.kind) for s in otel_spans.get_finished_spans()] == [("POST /chat", SpanKind.SERVER)]


def test_json_logs_carry_the_trace_and_span_ids(otel_spans: InMemorySpanExporter) -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord("routegate.x", logging.WARNING, __file__, 1, "turn %s failed", ("t1",), None)
    tracer = telemetry.tracer()
    assert tracer is not None
    with tracer.start_as_current_span("request") as span:
        line = json.loads(formatter.format(record))
    assert line["message"] == "turn t1 failed" and line["level"] == "WARNING" and line["logger"] == "routegate.x"
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["span_id"] == format(span.get_span_context().span_id, "016x")
    assert "trace_id" not in json.loads(formatter.format(record))  # outside a span: no ids
    assert log_config(Settings()) is None  # text (uvicorn's own) is the default
    assert log_config(Settings(log_format="json")) is not None


# -- end to end: `routegate serve` exporting to a loopback OTLP/HTTP collector ---------------------------------


class Collector(ThreadingHTTPServer):
    """A minimal OTLP/HTTP trace receiver: decodes every export into ``requests``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CollectorHandler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.received = threading.Condition()

    def spans(self) -> list[tuple[str, str, dict[str, object]]]:
        out = []
        for request in self.requests:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: _value(a.value) for a in span.attributes}
                        out.append((span.name, span.trace_id.hex(), attributes))
        return out

    def service_names(self) -> set[str]:
        return {
            str(_value(a.value))
            for request in self.requests
            for resource in request.resource_spans
            for a in resource.resource.attributes
            if a.key == "service.name"
        }


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


class _CollectorHandler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.server.received:
            self.server.requests.append(request)
            self.server.received.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def data_dir() -> Iterator[Path]:
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="routegate-otel-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.integration
def test_serve_exports_the_request_tree_over_otlp(collector: Collector, data_dir: Path) -> None:
    port = free_port()
    env = dict(
        os.environ,
        ROUTEGATE_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_port}",
        OTEL_SERVICE_NAME="desk-under-test",
        OTEL_BSP_SCHEDULE_DELAY="100",
        ROUTEGATE_LOG_FORMAT="json",
    )
    cmd = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # readiness, bounded
            assert proc.poll() is None, "routegate serve exited early:\n" + (proc.stdout.read() if proc.stdout else "")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "routegate serve did not get ready in 120 s"
            time.sleep(0.2)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/chat?session=abc",
            json={"message": "What is the status of ticket 1?"},
            headers={"Accept": "application/json", "traceparent": TRACEPARENT},
            timeout=60,
        )
        assert answer.status_code == 200
        assert answer.headers["x-request-id"] == TRACE_ID
        wanted = {"POST /chat", "routegate.turn", "routegate.policy", "routegate.delegate"}
        with collector.received:
            collector.received.wait_for(lambda: wanted <= {name for name, _, _ in collector.spans()}, timeout=30)
        spans = collector.spans()
        in_trace = {name for name, trace, _ in spans if trace == TRACE_ID}
        assert wanted <= in_trace, spans  # request → turn → router's policy check → tool delegation, one trace
        turn = next(attributes for name, _, attributes in spans if name == "routegate.turn")
        assert turn["routegate.route"] == "POSTGRES" and turn["routegate.runtime"] == "desk"
        assert collector.service_names() == {"desk-under-test"}
        exported = [str(value) for _, _, attributes in spans for value in attributes.values()]
        assert all(len(value) <= server_telemetry.ATTRIBUTE_LENGTH_LIMIT for value in exported)
        assert not any("session=abc" in value for value in exported)  # no query string in any span
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                output, _ = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                output, _ = proc.communicate(timeout=10)
        else:
            output = proc.stdout.read() if proc.stdout else ""
    json_lines = [line for line in output.splitlines() if line.startswith("{")]
    assert json_lines, output  # ROUTEGATE_LOG_FORMAT=json: the server's log lines are JSON objects
    assert all("level" in json.loads(line) for line in json_lines)


def test_request_spans_carry_no_query_string_session_id_or_long_text(
    start_server: StartServer, otel_spans: InMemorySpanExporter
) -> None:
    """Whatever provider records them (this one has no length limit): the route template instead of the path and
    query, a cut user agent, no attribute longer than the limit."""
    server = start_server(server_max_header_bytes=4 * 1024 * 1024)  # let the 2 MiB User-Agent through
    agent = "agent/" + "x" * (2 * 1024 * 1024)
    with httpx.Client(base_url=server.url, timeout=10, headers={"User-Agent": agent}) as client:
        assert client.get("/sessions/secret-session-1?session=abc").status_code == 200
        chat = client.post(
            "/chat?session=abc",
            json={"message": "How do I reset my password?", "session_id": "secret-session-1"},
            headers={"Accept": "application/json"},
        )
        assert chat.status_code == 200
    spans = _finished(otel_spans, 2)  # a request's span ends just after its last byte reached the client
    assert {s.name for s in spans} == {"GET /sessions/{session_id}", "POST /chat"}
    for span in spans:
        assert span.attributes is not None
        for key, value in span.attributes.items():
            text = str(value)
            assert len(text) <= server_telemetry.ATTRIBUTE_LENGTH_LIMIT, (span.name, key, len(text))
            assert "session=abc" not in text and "secret-session-1" not in text, (span.name, key, text)
        assert span.attributes["http.target"] in ("/sessions/{session_id}", "/chat")
        assert str(span.attributes["http.user_agent"]).startswith("agent/xxx")


def _finished(exporter: InMemorySpanExporter, count: int, *, timeout: float = 10.0) -> tuple[Any, ...]:
    """The exporter's finished spans once there are ``count`` of them (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while len(spans := exporter.get_finished_spans()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return tuple(spans)


@pytest.mark.parametrize(
    ("env", "limit"),
    [
        ({}, server_telemetry.ATTRIBUTE_LENGTH_LIMIT),
        ({"OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "50"}, 50),
        ({"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "70"}, 70),
    ],
)
def test_the_installed_sdk_cuts_every_attribute_value(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], limit: int
) -> None:
    """The SDK routegate installs (``OTEL_EXPORTER_OTLP_ENDPOINT`` set) has a length limit unless one is set."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    for name in ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=server_telemetry.span_limits())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("test").start_as_current_span("request") as span:
        span.set_attribute("http.user_agent", "u" * 5000)
    provider.shutdown()
    (recorded,) = exporter.get_finished_spans()
    assert recorded.attributes is not None
    assert len(str(recorded.attributes["http.user_agent"])) == limit
