"""A Plan run's OpenTelemetry spans: a root over the run (``routegate.plan``, or a runtime's own), ``routegate.step``
over each step.

The driver reads once per run whether it is traced (from the run's context, or by asking
:func:`~routegate.core.telemetry.tracer` when it has none) and picks the run's spans: :data:`NO_SPANS` (open none:
every method is a no-op, so the engine calls them without asking again) or a :class:`TracedSpans` — the plan's own
(``routegate.plan`` with a ``routegate.step`` per step) or the one a runtime asks for
(:meth:`routegate.plan.Runtime.spans`: its root, ``routegate.run`` for the routing agent, ``routegate.dispatch``
for the technique dispatcher, with or without step spans). The lean branch of an untraced run never comes here.

A step's span is opened before its target runs, so the target's own spans (an agent run, a dispatch, an LLM call)
hang below it, and closed once the step's routing is decided — after the target returned, in the interpreter's
next turn of the loop — which is why it is an :func:`~routegate.core.telemetry.open_span` rather than a ``with``
block. Step spans carry the step's name, its iteration, the step it routed to and, when it failed, its stop
reason; never a payload, and never the text of a routing decision (``why`` may quote a field of a step's output).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final

from opentelemetry.trace import INVALID_SPAN, Span, Tracer

from routegate.core.result import RunResult
from routegate.core.telemetry import Attr, CurrentSpan, end_run, open_span, record_stop, span
from routegate.plan._compiled import Compiled
from routegate.plan._position import Decision
from routegate.plan.envelope import Envelope

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

    def nested(self, name: str | None) -> RunSpans:
        """The spans of a plan (named ``name``) run as a step of this run."""
        return self

    def begin(self, envelopes: list[Envelope], decisions: list[Decision]) -> None:
        """The run starts (``envelopes``/``decisions``: its path, appended to as it goes)."""

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

    def end(self, result: RunResult[Any] | None, exc: BaseException | None = None) -> None:
        """The run ended with ``result`` (a runtime's: its own result type), or raised ``exc``."""


NO_SPANS: Final = RunSpans()

Record = Callable[[Any], Mapping[str, Any]]
"""What a run's root span records when it ends, beside its stop reason and phase: attributes read from its result."""


class TracedSpans(RunSpans):
    """The spans of a traced run: its root ``name`` (``routegate.plan`` unless a runtime names its own) with
    ``attributes``; with ``steps``, a ``routegate.step`` span per step below it. When the run ends, the root records
    its stop reason and phase (:func:`~routegate.core.telemetry.end_run`) and what ``record`` reads from the
    result (by default a plan's step and iteration counts)."""

    __slots__ = (
        "_attributes",
        "_decisions",
        "_envelopes",
        "_iteration",
        "_name",
        "_opened",
        "_opened_at",
        "_record",
        "_root",
        "_steps",
        "_tracer",
    )

    watching = True

    def __init__(
        self,
        tracer: Tracer,
        name: str = PLAN_SPAN,
        attributes: Mapping[str, Any] | None = None,
        *,
        record: Record | None = None,
        steps: bool = True,
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._attributes = attributes if attributes is not None else plan_attributes(None)
        self._record = record
        self._steps = steps
        self._root: CurrentSpan | None = None
        self._opened: CurrentSpan | None = None  # the span of the step whose routing is being decided
        self._opened_at = 0  # the index of that step's envelope
        self._iteration: int | None = None  # the iteration running now (at the end: the iterations used)
        self._envelopes: list[Envelope] = []
        self._decisions: list[Decision] = []

    def nested(self, name: str | None) -> RunSpans:
        return TracedSpans(self._tracer, PLAN_SPAN, plan_attributes(name))

    def begin(self, envelopes: list[Envelope], decisions: list[Decision]) -> None:
        self._root = open_span(self._tracer, self._name, self._attributes)
        self._envelopes, self._decisions = envelopes, decisions

    def resumed(self, resumed: bool) -> None:
        assert self._root is not None
        self._root.span.set_attribute(Attr.RESUMED, resumed)

    def step(self, step: Compiled, iteration: int) -> None:
        if self._opened is not None:
            self.close_step()
        self._iteration = iteration
        if self._steps and not step.band_end:  # a band's members each open their own span
            self._opened_at = len(self._envelopes)
            self._opened = open_span(self._tracer, STEP_SPAN, {Attr.STEP: step.name, Attr.ITERATION: iteration})

    def member(self, name: str) -> AbstractContextManager[Span]:
        if not self._steps:
            return _NO_SPAN
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

    def end(self, result: RunResult[Any] | None, exc: BaseException | None = None) -> None:
        root = self._root
        assert root is not None
        if exc is not None:
            self.close_step(exc)
        elif result is not None:
            if self._record is None:
                recorded: Mapping[str, Any] = {Attr.STEPS: len(self._envelopes), Attr.ITERATIONS: self._iteration}
            else:
                recorded = self._record(result)
            end_run(root.span, result.stop_reason, result.phase, **recorded)
        root.close(exc)


__all__ = ["NO_SPANS", "PLAN_SPAN", "STEP_SPAN", "Record", "RunSpans", "TracedSpans", "plan_attributes"]
