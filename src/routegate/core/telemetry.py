"""OpenTelemetry spans for routegate's runs, through the OpenTelemetry **API** only (the convention for libraries).

routegate never configures OpenTelemetry itself (``routegate serve``/``up`` do, from the standard ``OTEL_*``
variables, when they are set). Until an application installs a tracer provider, :func:`tracer` answers ``None``
and the runtimes open no span at all — a run then pays one global lookup, not the API's no-op spans (a no-op span
still attaches and detaches a context).

Once a provider is installed (``opentelemetry.trace.set_tracer_provider``, or :func:`use_tracer_provider` to send
only routegate's spans somewhere), every run is one span tree::

    routegate.run (agent) | routegate.tool_agent (tool agent) | routegate.dispatch (technique)
    | routegate.turn (desk) | routegate.plan (Plan)
    ├── routegate.route          the router's decision (layer, score, margin, runner-up)
    ├── routegate.policy         the policy boundary's verdict
    ├── routegate.delegate       the gateway and the worker (tool and LLM spans hang below)
    ├── routegate.step           a Plan step (its target's own spans hang below)
    └── routegate.finalize

Every span is opened the same way: :func:`span` (a ``with`` block) or :func:`open_span` (a span whose end is not
the end of a block, closed with :meth:`CurrentSpan.close`). Both start the span with the tracer's ``start_span``
and make it current with one context attach: the API's ``start_as_current_span`` wraps the same in two
generator-based context managers, which cost more than a bare span's attach and detach (``bench/telemetry.py``).

A run decides once whether it is traced: :func:`spans_for` picks its kernel :class:`Spans` (:data:`NO_SPANS`, whose
methods open nothing, or spans under the run's tracer), which its :class:`~routegate.core.context.RunContext`
carries as ``ctx.spans``.

Attribute names are in :class:`Attr`; message text is never recorded (a run's spans carry ids, routes, scores and
stop reasons only), and an exception marks a span by its type alone — never its message.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import Any, Final, TypeVar

from opentelemetry import trace as _trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracerProvider,
    Span,
    SpanKind,
    StatusCode,
    Tracer,
    TracerProvider,
    set_span_in_context,
)

from routegate.errors import RunStopError

_NAME: Final = "routegate"
_NO_SPAN: Final = contextlib.nullcontext(INVALID_SPAN)
_FROM_ENV: Final = OTEL_PYTHON_TRACER_PROVIDER in os.environ  # a provider named by the environment
ERROR_TYPE: Final = "error.type"  # the OpenTelemetry convention: what kind of error ended the operation

T = TypeVar("T")

_override: TracerProvider | None = None
_cached: tuple[object, Tracer | None] = (None, None)


class Attr:
    """The ``routegate.*`` span attributes."""

    RUNTIME: Final = "routegate.runtime"  # agent | tool_agent | plan | desk | dispatch
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
    PLAN: Final = "routegate.plan"  # a Plan's name (when it has one)
    STEP: Final = "routegate.step"  # a Plan step's name
    ITERATION: Final = "routegate.iteration"  # which iteration of its Plan run a step ran in (1-based)
    ITERATIONS: Final = "routegate.iterations"  # iterations a Plan run used (its max_iterations budget)
    STEPS: Final = "routegate.steps"  # steps a Plan run executed (each member of a parallel band counts)
    NEXT: Final = "routegate.next"  # the step a Plan step routed to
    RESUMED: Final = "routegate.resumed"  # a durable Plan run that continued from a checkpoint
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
        from routegate._version import __version__  # the metadata is read once, when a tracer is first made

        found = provider.get_tracer(_NAME, __version__)
    _cached = (provider, found)
    return found


class CurrentSpan:
    """A started span that is the current one until it is closed: as a ``with`` block (:func:`span`), or until
    :meth:`close` (:func:`open_span`). Closing ends the span; an :class:`Exception` marks it as an error by its
    type (``error.type``), never by its message, which may hold user text."""

    __slots__ = ("_token", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self._token: Token[Context] | None = None

    def __enter__(self) -> Span:
        self._token = attach(set_span_in_context(self.span))
        return self.span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close(exc)

    def close(self, exc: BaseException | None = None) -> None:
        """Stop being the current span and end it (``exc``: the exception that is leaving its block, if any).

        The run-stop signal (:class:`~routegate.errors.RunStopError`) marks the span with its stop reason; any
        other :class:`Exception` with its class name, unless the span's code already marked it as an error. A
        :class:`BaseException` that is not an :class:`Exception` (a cancellation, Ctrl-C) is no error of the
        operation and leaves no mark."""
        token = self._token
        if token is not None:
            self._token = None
            detach(token)
        current = self.span
        if isinstance(exc, Exception) and current.is_recording():
            if isinstance(exc, RunStopError):
                record_stop(current, exc.stop_reason)
            else:
                status = getattr(current, "status", None)  # the SDK's spans show it; the API's Span does not
                if status is None or status.status_code is StatusCode.UNSET:
                    current.set_attribute(ERROR_TYPE, type(exc).__name__)
                    current.set_status(StatusCode.ERROR, type(exc).__name__)
        current.end()


def span(
    active: Tracer | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> AbstractContextManager[Span]:
    """A child span of the current one for a ``with`` block when ``active`` (from :func:`tracer`) is a tracer;
    else a shared no-op that opens nothing."""
    if active is None:
        return _NO_SPAN
    return CurrentSpan(active.start_span(name, kind=kind, attributes=attributes))


def open_span(active: Tracer, name: str, attributes: Mapping[str, Any] | None = None) -> CurrentSpan:
    """A child span of the current one, current from now until :meth:`CurrentSpan.close` (for a span that does
    not end with a block, such as a Plan step's: it ends once the step's routing is decided)."""
    opened = CurrentSpan(active.start_span(name, attributes=attributes))
    opened.__enter__()
    return opened


def record_stop(span_: Span, stop_reason: str) -> None:
    """Mark ``span_`` as where a run stopped: the stop reason, and an error status carrying it."""
    span_.set_attribute(Attr.STOP_REASON, stop_reason)
    span_.set_status(StatusCode.ERROR, stop_reason)


def end_run(span_: Span, stop_reason: str, phase: str | None, **attributes: Any) -> None:
    """Record how a run ended on its root span: the stop reason, the phase, and an error status when it stopped."""
    if not span_.is_recording():
        return
    ended = {key: value for key, value in attributes.items() if value is not None}
    ended[Attr.STOP_REASON] = stop_reason
    if phase is not None:
        ended[Attr.PHASE] = phase
    span_.set_attributes(ended)
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


class Spans:
    """The kernel's spans of a run: each method opens a child span of the current one under the run's tracer, or,
    for a run that opens none (no tracer provider is installed), hands back a shared no-op block, so a runtime and
    its governed steps open their spans without asking whether to.

    A runtime asks once per run (:func:`spans_for`) and keeps the answer on its
    :class:`~routegate.core.context.RunContext` (``ctx.spans``); a Plan run does the same with the Plan's own
    spans (``routegate.plan._spans``). The methods take what a span records, never a ready attribute mapping, so
    an untraced run builds none."""

    __slots__ = ("_tracer",)

    def __init__(self, active: Tracer | None) -> None:
        self._tracer = active

    @property
    def tracer(self) -> Tracer | None:
        """The tracer these spans go to (``None``: they open nothing)."""
        return self._tracer

    def root(
        self,
        name: str,
        attributes: Callable[[], Mapping[str, Any]],
        work: Awaitable[T],
        record: Callable[[Span, T], None],
    ) -> Awaitable[T]:
        """``work`` (a run) under its root span ``name`` (``routegate.dispatch``, ``routegate.turn``), started with
        what ``attributes()`` returns (called only when traced); ``record`` marks the span with what it returned."""
        active = self._tracer
        return work if active is None else _around(active, name, attributes(), work, record)

    def run(self, run_id: str, work: Awaitable[T], record: Callable[[Span, T], None]) -> Awaitable[T]:
        """``work`` (a routing agent's run) under its root span ``routegate.run``; ``record`` marks the span with
        what it returned. Untraced: ``work`` itself, so the run awaits it with nothing around it."""
        active = self._tracer
        if active is None:
            return work
        return _around(active, "routegate.run", {Attr.RUNTIME: "agent", Attr.RUN_ID: run_id}, work, record)

    def route(self, attempt: int, work: Awaitable[T], record: Callable[[Span, T], None]) -> Awaitable[T]:
        """``work`` (the router deciding ``attempt``) under ``routegate.route``; ``record`` marks the span with
        the decision."""
        active = self._tracer
        return work if active is None else _around(active, "routegate.route", {Attr.ATTEMPT: attempt}, work, record)

    def policy(self, attempt: int) -> AbstractContextManager[Span]:
        """``routegate.policy``: the policy boundary's verdict on ``attempt``'s decision."""
        active = self._tracer
        if active is None:
            return _NO_SPAN
        return CurrentSpan(active.start_span("routegate.policy", attributes={Attr.ATTEMPT: attempt}))

    def delegate(self, attempt: int, target: str, digest: str) -> AbstractContextManager[Span]:
        """``routegate.delegate``: the gateway and the worker ``target`` with arguments hashed to ``digest``."""
        active = self._tracer
        if active is None:
            return _NO_SPAN
        attributes: dict[str, str | int] = {Attr.ATTEMPT: attempt, Attr.TARGET: target, Attr.ARGS_HASH: digest}
        return CurrentSpan(active.start_span("routegate.delegate", attributes=attributes))

    def finalize(self, work: Awaitable[T]) -> Awaitable[T]:
        """``work`` (the finalizer writing the answer) under ``routegate.finalize``."""
        active = self._tracer
        return work if active is None else _around(active, "routegate.finalize", None, work, None)


async def _around(
    active: Tracer,
    name: str,
    attributes: Mapping[str, Any] | None,
    work: Awaitable[T],
    record: Callable[[Span, T], None] | None,
) -> T:
    """``work`` awaited under a child span ``name`` of the current one; ``record`` marks it with what it returned."""
    with CurrentSpan(active.start_span(name, attributes=attributes)) as opened:
        value = await work
        if record is not None and opened.is_recording():
            record(opened, value)
        return value


NO_SPANS: Final = Spans(None)


def spans_for(active: Tracer | None) -> Spans:
    """The kernel's spans of a run whose tracer is ``active`` (from :func:`tracer`): the one place a run's
    spans-or-not is decided."""
    return NO_SPANS if active is None else Spans(active)
