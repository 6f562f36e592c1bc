"""OpenTelemetry spans for routegate's runs, through the OpenTelemetry **API** only (the convention for libraries).

routegate never configures OpenTelemetry itself (``routegate serve``/``up`` do, from the standard ``OTEL_*``
variables, when they are set). Until an application installs a tracer provider, :func:`tracer` answers ``None``
and the runtimes open no span at all — a run then pays one global lookup per span site, not the API's no-op spans
(a no-op span still attaches and detaches a context: about 4 µs each).

Once a provider is installed (``opentelemetry.trace.set_tracer_provider``, or :func:`use_tracer_provider` to send
only routegate's spans somewhere), every run is one span tree::

    routegate.run (agent) | routegate.dispatch (technique dispatcher)
    ├── routegate.attempt            one per route attempt
    │   ├── routegate.route          the router's decision (layer, score, margin, runner-up)
    │   ├── routegate.policy         the policy boundary's verdict
    │   └── routegate.delegate       the gateway and the worker (tool and LLM spans hang below)
    └── routegate.finalize

Attribute names are in :class:`Attr`; message text is never recorded (a run's spans carry ids, routes, scores and
stop reasons only).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Final

from opentelemetry import trace as _trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import INVALID_SPAN, NoOpTracerProvider, Span, SpanKind, StatusCode, Tracer, TracerProvider

_NAME: Final = "routegate"
_NO_SPAN: Final = contextlib.nullcontext(INVALID_SPAN)
_FROM_ENV: Final = OTEL_PYTHON_TRACER_PROVIDER in os.environ  # a provider named by the environment

_override: TracerProvider | None = None
_cached: tuple[object, Tracer | None] = (None, None)


class Attr:
    """The ``routegate.*`` span attributes."""

    RUNTIME: Final = "routegate.runtime"  # agent | plan | desk | dispatch
    RUN_ID: Final = "routegate.run_id"
    STOP_REASON: Final = "routegate.stop_reason"
    PHASE: Final = "routegate.phase"
    ROUTE: Final = "routegate.route"  # the selected target
    ATTEMPT: Final = "routegate.attempt"
    ATTEMPTS: Final = "routegate.attempts"  # route attempts used
    DELEGATIONS: Final = "routegate.delegations"  # delegations used
    TARGET: Final = "routegate.target"
    ARGS_HASH: Final = "routegate.args_hash"
    OBSERVATION_STATUS: Final = "routegate.observation_status"
    ROUTER_LAYER: Final = "routegate.router.layer"  # what decided: rules, semantic, llm, ...
    ROUTER_SCORE: Final = "routegate.router.score"
    ROUTER_MARGIN: Final = "routegate.router.margin"
    ROUTER_RUNNER_UP: Final = "routegate.router.runner_up"
    STEP: Final = "routegate.step"
    NEXT: Final = "routegate.next"
    SESSION: Final = "routegate.session_id"
    PARTS: Final = "routegate.parts"  # parts of a technique output
    OUTPUT_KIND: Final = "routegate.output_kind"  # prose, code_block, tool_call, a2a_request


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Send routegate's spans to ``provider`` instead of the global one (``None``: back to the global one)."""
    global _override
    _override = provider


def current_provider() -> TracerProvider:
    """The tracer provider routegate's spans go to (the one :func:`use_tracer_provider` set, else the global)."""
    return _override or _trace.get_tracer_provider()


def tracer() -> Tracer | None:
    """routegate's tracer when a real tracer provider is installed, else ``None`` (then open no span)."""
    global _cached
    provider: object = _override or _trace._TRACER_PROVIDER
    if provider is None:
        if not _FROM_ENV:
            return None
        provider = _trace.get_tracer_provider()
    if provider is _cached[0]:
        return _cached[1]
    found: Tracer | None = None
    if isinstance(provider, TracerProvider) and not isinstance(provider, NoOpTracerProvider):
        found = provider.get_tracer(_NAME, _version())
    _cached = (provider, found)
    return found


def span(
    active: Tracer | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> AbstractContextManager[Span]:
    """A child span of the current one when ``active`` (from :func:`tracer`) is a tracer; else a shared no-op."""
    if active is None:
        return _NO_SPAN
    return active.start_as_current_span(name, kind=kind, attributes=attributes, record_exception=False)


def end_run(span_: Span, stop_reason: str, phase: str | None, **attributes: Any) -> None:
    """Record how a run ended on its root span: the stop reason, the phase, and an error status when it stopped."""
    if not span_.is_recording():
        return
    span_.set_attribute(Attr.STOP_REASON, stop_reason)
    if phase is not None:
        span_.set_attribute(Attr.PHASE, phase)
    for key, value in attributes.items():
        if value is not None:
            span_.set_attribute(key, value)
    if stop_reason != "success":
        span_.set_status(StatusCode.ERROR, stop_reason)


def decision_attributes(decided_by: str, scores: Mapping[str, float] | None) -> dict[str, Any]:
    """The router attributes of a decision: its layer, the top score, its margin over the runner-up."""
    out: dict[str, Any] = {}
    if decided_by:
        out[Attr.ROUTER_LAYER] = decided_by
    if scores:
        ranked = sorted(((float(v), str(k)) for k, v in scores.items()), reverse=True)
        out[Attr.ROUTER_SCORE] = ranked[0][0]
        if len(ranked) > 1:
            out[Attr.ROUTER_MARGIN] = ranked[0][0] - ranked[1][0]
            out[Attr.ROUTER_RUNNER_UP] = ranked[1][1]
    return out


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("routegate")
    except Exception:  # pragma: no cover - running from a source tree without metadata
        return "0"
