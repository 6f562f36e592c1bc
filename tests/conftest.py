"""Test-wide guards: no network outside loopback; no embedded PostgreSQL kept running after a test."""

from __future__ import annotations

import socket
from typing import Any

import pytest

_LOOPBACK_PREFIXES = ("127.", "::1", "localhost", "0.0.0.0")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = str(address[0])
        if not host.startswith(_LOOPBACK_PREFIXES):
            raise RuntimeError(f"tests may not open network connections outside loopback (tried {host})")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # a command's embedded PostgreSQL stops with the command, as the tests' temporary data dirs expect (a warm one
    # would outlive the test); the tests of keeping it warm set their own time
    monkeypatch.setenv("ROUTEGATE_DB_KEEP_WARM_SECONDS", "0")


@pytest.fixture
def otel_spans() -> Any:
    """routegate's spans for this test, in the OpenTelemetry SDK's in-memory exporter (``.get_finished_spans()``)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from routegate.core import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.use_tracer_provider(None)
        provider.shutdown()
