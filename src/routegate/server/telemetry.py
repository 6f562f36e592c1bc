"""The server's OpenTelemetry set-up: the SDK and the OTLP exporter from the standard ``OTEL_*`` variables.

The library code of routegate uses the OpenTelemetry API only. The server is an application, so it may install
the SDK — and does, once per process, when (and only when) an exporter endpoint is configured:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, and neither
  ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``;
* the exporter speaks OTLP over HTTP/protobuf (``OTEL_EXPORTER_OTLP_PROTOCOL`` unset or ``http/protobuf``; gRPC
  is refused with a clear message), batches spans, and reads its other settings (headers, timeout, compression)
  from the environment itself;
* ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service (default ``routegate``);
  ``OTEL_BSP_*`` tune the batching; the last batch is flushed when the process exits;
  ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` pick the sampler (the SDK reads them).

Then every HTTP request gets a server span from ``opentelemetry-instrumentation-fastapi`` (an incoming
``traceparent`` header continues the caller's trace), and the desk's turn hangs below it.

Span attributes are bounded: the SDK installed here truncates every attribute value to
:data:`ATTRIBUTE_LENGTH_LIMIT` characters unless ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` (or
``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``) says otherwise, and a request span never carries the query string or a
path's ids, whatever provider records it: ``http.target`` / ``url.path`` and ``http.url`` name the route template
(``/sessions/{session_id}``), ``url.query`` is emptied, the user agent is cut to :data:`USER_AGENT_LIMIT`
characters and any other text attribute to :data:`ATTRIBUTE_LENGTH_LIMIT`. Every response carries
``X-Request-Id``: the caller's own (when it sent a sane one), else the trace id, else a fresh id.
Nothing is exported when no endpoint is set; the SDK then is not even imported.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import trace

from routegate._extras import install_command, needs

with needs("server"):
    from fastapi import FastAPI

from routegate.core import telemetry
from routegate.errors import ConfigurationError, MissingExtraError
from routegate.server._asgi import HttpMiddleware, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

_configured: Any = None  # the SDK TracerProvider this process installed, if any
_SANE_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")
ATTRIBUTE_LENGTH_LIMIT: Final = 1024  # characters of one span attribute value, unless OTEL_*_LENGTH_LIMIT is set
USER_AGENT_LIMIT: Final = 256
_LENGTH_LIMIT_VARIABLES: Final = ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")


def export_requested(environ: os._Environ[str] | dict[str, str] | None = None) -> bool:
    """True when the environment asks for spans to be exported over OTLP."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure_tracing() -> Any:
    """Install the SDK with a batching OTLP/HTTP exporter when the environment asks for it (once per process).

    Returns the installed provider (``None`` when nothing was asked for). Raises
    :class:`~routegate.errors.ConfigurationError` when export is asked for but cannot work (the extra is not
    installed, or a protocol other than ``http/protobuf`` is named).
    """
    global _configured
    if _configured is not None or not export_requested():
        return _configured
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    )
    if protocol.strip() not in ("", "http/protobuf"):
        raise ConfigurationError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; routegate exports OTLP over HTTP: "
            "set it to 'http/protobuf' (or leave it unset) and point OTEL_EXPORTER_OTLP_ENDPOINT at the "
            "collector's HTTP port (4318)"
        )
    try:
        with needs("otel"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import OTELResourceDetector, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except MissingExtraError as exc:
        raise MissingExtraError(
            f"OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed ({exc.name}); "
            f"run {install_command('otel')}, or unset the variable",
            extra="otel",
            module=exc.name,
        ) from exc
    resource = Resource.create({"service.name": "routegate"}).merge(OTELResourceDetector().detect())
    if os.environ.get("OTEL_SERVICE_NAME"):
        resource = resource.merge(Resource.create({"service.name": os.environ["OTEL_SERVICE_NAME"]}))
    provider = TracerProvider(resource=resource, span_limits=span_limits())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _configured = provider
    log.info("exporting OpenTelemetry spans to %s", _endpoint())
    return provider


def span_limits() -> Any:
    """The SDK's ``SpanLimits``: the ``OTEL_*`` limits when set, else attribute values cut at
    :data:`ATTRIBUTE_LENGTH_LIMIT` characters (the SDK's own default is no limit)."""
    with needs("otel"):
        from opentelemetry.sdk.trace import SpanLimits

    length = None if any(name in os.environ for name in _LENGTH_LIMIT_VARIABLES) else ATTRIBUTE_LENGTH_LIMIT
    return SpanLimits(max_attribute_length=length)  # None: the SDK reads the variables itself


def instrument(app: FastAPI) -> None:
    """Server spans for every request (when a tracer provider is installed) and ``X-Request-Id`` on every answer.

    One server span per request: the ASGI instrumentation's ``http send`` / ``http receive`` spans are left out —
    a streamed answer would otherwise record a span per server-sent event (per token), each costing as much as
    any other span, and saying nothing the request span and the turn's spans do not."""
    if telemetry.tracer() is not None:
        with needs("otel"):
            from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=telemetry.current_provider(),
            excluded_urls="healthz,metrics",
            exclude_spans=["receive", "send"],
            server_request_hook=scrub_request_span,
        )
    app.add_middleware(RequestId)


def scrub_request_span(span: trace.Span, scope: Mapping[str, Any]) -> None:
    """Called with every request span as it starts: no query string, no path ids, no long text (module doc)."""
    if not span.is_recording():
        return
    attributes: Mapping[str, Any] = getattr(span, "attributes", None) or {}
    route = attributes.get("http.route")
    target = route if isinstance(route, str) else str(scope.get("path", ""))[:ATTRIBUTE_LENGTH_LIMIT]
    updates: dict[str, str] = {}
    for key, value in attributes.items():
        if not isinstance(value, str):
            continue
        if key in ("http.target", "url.path"):
            updates[key] = target
        elif key == "http.url":
            parts = urlsplit(value)
            updates[key] = urlunsplit((parts.scheme, parts.netloc[:ATTRIBUTE_LENGTH_LIMIT], target, "", ""))
        elif key == "url.query":
            updates[key] = ""
        elif key in ("http.user_agent", "user_agent.original"):
            updates[key] = value[:USER_AGENT_LIMIT]
        elif len(value) > ATTRIBUTE_LENGTH_LIMIT:
            updates[key] = value[:ATTRIBUTE_LENGTH_LIMIT]
    span.set_attributes(updates)


class RequestId(HttpMiddleware):
    """Answers every request with ``X-Request-Id`` (the caller's, the trace id, or a fresh one)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                request_id = given if given is not None and _SANE_ID.match(given) else _request_id()
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id)]
            await send(message)

        await self.app(scope, receive, send_with_id)


def _request_id() -> bytes:
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return format(context.trace_id, "032x").encode()
    return uuid.uuid4().hex.encode()


def _endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
