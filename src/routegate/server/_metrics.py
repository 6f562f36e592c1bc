"""Prometheus metrics, one registry per app (no module-level collectors), and the ASGI middleware that times
every request. Label values that come from the desk (stop reasons, fallback reasons, layers) are bounded so a
misbehaving component cannot blow up the number of series."""

from __future__ import annotations

import time

from routegate._extras import needs

with needs("server"):
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from routegate.apps.support.contracts import RouteChosen, TurnResult
from routegate.server._asgi import ASGIApp, HttpMiddleware, Message, Receive, Scope, Send

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_MAX_LABEL_CHARS = 64
_MAX_VALUES_PER_LABEL = 64
_MODEL_STATES = ("ok", "degraded", "down", "off")


class _BoundedLabels:
    """Passes label values through until ``_MAX_VALUES_PER_LABEL`` distinct ones were seen, then ``other``."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        value = value[:_MAX_LABEL_CHARS] or "none"
        if value in self._seen:
            return value
        if len(self._seen) >= _MAX_VALUES_PER_LABEL:
            return "other"
        self._seen.add(value)
        return value


class ServerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "routegate_http_requests",
            "HTTP requests by method, route template and status",
            ["method", "path", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "routegate_http_request_duration_seconds",
            "HTTP request duration until the last byte was sent (streams included)",
            ["method", "path"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.turns = Counter(
            "routegate_chat_turns", "Chat turns by endpoint and mode", ["endpoint", "mode"], registry=r
        )
        self.turn_seconds = Histogram(
            "routegate_chat_turn_duration_seconds",
            "Turn latency as reported by the desk",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.routes = Counter("routegate_routes_chosen", "Routes chosen by the router", ["route", "layer"], registry=r)
        self.stop_reasons = Counter("routegate_stop_reasons", "Turn stop reasons", ["stop_reason"], registry=r)
        self.fallbacks = Counter(
            "routegate_fallbacks", "Turns whose answer fell back to the LLM node", ["route", "reason"], registry=r
        )
        self.turn_errors = Counter("routegate_turn_errors", "Turns that ended in an error", ["code"], registry=r)
        self.disconnects = Counter(
            "routegate_stream_disconnects", "Streams the client left before the final event", registry=r
        )
        self.refusals = Counter(
            "routegate_tenant_refusals",
            "Turns refused by a tenant's limit (429), by code: rate_limited, too_many_concurrent_turns",
            ["code"],
            registry=r,
        )
        self.model = Gauge(
            "routegate_model_state",
            "The chat model's state: 1 for the current one (ok, degraded, down, off); down = answered offline",
            ["state"],
            registry=r,
        )
        self._layer = _BoundedLabels()
        self._stop = _BoundedLabels()
        self._fallback = _BoundedLabels()
        self._code = _BoundedLabels()

    def route_chosen(self, event: RouteChosen) -> None:
        self.routes.labels(event.route, self._layer(event.layer)).inc()

    def turn_finished(self, result: TurnResult) -> None:
        self.stop_reasons.labels(self._stop(result.stop_reason)).inc()
        self.turn_seconds.labels(result.route).observe(max(result.latency_ms, 0.0) / 1000.0)
        if result.fallback is not None:
            self.fallbacks.labels(result.route, self._fallback(_reason_family(result.fallback))).inc()

    def model_state(self, state: str | None) -> None:
        """Set the model-state gauge (nothing when the desk cannot tell)."""
        if state is None:
            return
        for name in _MODEL_STATES:
            self.model.labels(name).set(1 if name == state else 0)

    def turn_failed(self, code: str) -> None:
        self.turn_errors.labels(self._code(code)).inc()

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


def _reason_family(reason: str) -> str:
    """``empty: no rows for ...`` → ``empty``: keep the family, drop free text that would mint new series."""
    for sep in (":", " "):
        if sep in reason:
            return reason.split(sep, 1)[0]
    return reason


class MetricsMiddleware(HttpMiddleware):
    def __init__(self, app: ASGIApp, *, metrics: ServerMetrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500
        recorded = False

        def record() -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            method = scope["method"]
            self.metrics.requests.labels(method, path, str(status)).inc()
            self.metrics.request_seconds.labels(method, path).observe(time.perf_counter() - started)

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                record()

        try:
            await self.app(scope, receive, timed_send)
        finally:
            record()
