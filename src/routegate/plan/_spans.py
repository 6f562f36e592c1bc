"""A Plan run's OpenTelemetry spans: ``routegate.plan`` over the run, ``routegate.step`` over each step.

The driver asks once per run whether a tracer provider is installed and picks the run's spans: :data:`NO_SPANS`
(open none: every method is a no-op, so the engine calls them without asking again) or a :class:`TracedSpans` of
its own. The lean branch of an untraced run never comes here at all.

A step's span is opened before its target runs, so the target's own spans (an agent run, a dispatch, an LLM call)
hang below it, and closed once the step's routing is decided — after the target returned, in the interpreter's
next turn of the loop — which is why it is an :func:`~routegate.core.telemetry.open_span` rather than a ``with``
block. Step spans carry the step's name, its iteration, the step it routed to and, when it failed, its stop
reason; never a payload, and never the text of a routing decision (``why`` may quote a field of a step's output).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any, Final

from opentelemetry.trace import INVALID_SPAN, Span, Tracer

from routegate.core.context import RunContext
from routegate.core.telemetry import Attr, CurrentSpan, end_run, open_span, record_stop, span
from routegate.plan._compiled import Compiled
from routegate.plan._position import Decision
from routegate.plan.envelope import Envelope
from routegate.plan.result import PlanResult

STEP_SPAN = "routegate.step"
PLAN_SPAN = "routegate.plan"
_NO_SPAN: Final = contextlib.nullcontext(INVALID_SPAN)


def plan_attributes(name: str | None) -> dict[str, str]:
    """The attributes a ``routegate.plan`` span starts with."""
    if name is None:
        return {Attr.RUNTIME: "plan"}
    return {Attr.RUNTIME: "plan", Attr.PLAN: name}


class RunSpans:
    """The spans of a run that opens none (no tracer provider is installed): every method does nothing."""

    __slots__ = ()

    watching: bool = False  # the interpreter watches a traced run between steps

    def nested(self) -> RunSpans:
        """The spans of a plan run as a step of this run."""
        return self

    def begin(
        self, name: str | None, envelopes: list[Envelope], decisions: list[Decision], ctx: RunContext[Any] | None
    ) -> None:
        """The run starts (``envelopes``/``decisions``: its path, appended to as it goes; ``ctx``: its context)."""

    def resumed(self, resumed: bool) -> None:
        """A durable run continues from a checkpoint (or is answered from one) — or starts fresh."""

    def step(self, step: Compiled, iteration: int) -> None:
        """The routing of the previous step is decided and ``step`` (or the band it starts) runs next."""

    def member(self, name: str) -> AbstractContextManager[Span]:
        """A block around a member of the parallel band running now."""
        return _NO_SPAN

    def close_step(self, exc: BaseException | None = None) -> None:
        """The step running now ended outside its routing: cut off by the deadline, or the run raised."""

    def finish(self, iterations: int) -> None:
        """The interpreter ended after ``iterations`` steps."""

    def end(self, result: PlanResult | None, exc: BaseException | None = None) -> None:
        """The run ended with ``result`` (a prebuilt plan's: its own result type), or raised ``exc``."""


NO_SPANS: Final = RunSpans()


class TracedSpans(RunSpans):
    """The spans of a traced run: the ``routegate.plan`` root, the open step span and the iteration it runs."""

    __slots__ = ("_decisions", "_envelopes", "_iteration", "_opened", "_opened_at", "_root", "_tracer")

    watching = True

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._root: CurrentSpan | None = None
        self._opened: CurrentSpan | None = None  # the span of the step whose routing is being decided
        self._opened_at = 0  # the index of that step's envelope
        self._iteration: int | None = None  # the iteration running now (at the end: the iterations used)
        self._envelopes: list[Envelope] = []
        self._decisions: list[Decision] = []

    def nested(self) -> RunSpans:
        return TracedSpans(self._tracer)

    def begin(
        self, name: str | None, envelopes: list[Envelope], decisions: list[Decision], ctx: RunContext[Any] | None
    ) -> None:
        self._root = open_span(self._tracer, PLAN_SPAN, plan_attributes(name))
        self._envelopes, self._decisions = envelopes, decisions

    def resumed(self, resumed: bool) -> None:
        assert self._root is not None
        self._root.span.set_attribute(Attr.RESUMED, resumed)

    def step(self, step: Compiled, iteration: int) -> None:
        if self._opened is not None:
            self.close_step()
        self._iteration = iteration
        if not step.band_end:  # a band's members each open their own span
            self._opened_at = len(self._envelopes)
            self._opened = open_span(self._tracer, STEP_SPAN, {Attr.STEP: step.name, Attr.ITERATION: iteration})

    def member(self, name: str) -> AbstractContextManager[Span]:
        return span(self._tracer, STEP_SPAN, {Attr.STEP: name, Attr.ITERATION: self._iteration or 0})

    def close_step(self, exc: BaseException | None = None) -> None:
        opened, at = self._opened, self._opened_at
        if opened is None:
            return
        self._opened = None
        envelopes, decisions = self._envelopes, self._decisions
        current = opened.span
        if current.is_recording():
            decision = decisions[at] if at < len(decisions) else None
            if decision is not None and decision[0] is not None:
                current.set_attribute(Attr.NEXT, decision[0])
            env = envelopes[at] if at < len(envelopes) else None
            if env is not None and env.error is not None:
                record_stop(current, env.error.stop_reason)
        opened.close(exc)

    def finish(self, iterations: int) -> None:
        self._iteration = iterations
        self.close_step()

    def end(self, result: PlanResult | None, exc: BaseException | None = None) -> None:
        root = self._root
        assert root is not None
        if exc is not None:
            self.close_step(exc)
        elif result is not None:
            steps = len(result.envelopes)
            end_run(
                root.span, result.stop_reason, result.phase, **{Attr.STEPS: steps, Attr.ITERATIONS: self._iteration}
            )
        root.close(exc)


__all__ = ["NO_SPANS", "PLAN_SPAN", "STEP_SPAN", "RunSpans", "TracedSpans", "plan_attributes"]
