"""A Plan run's OpenTelemetry spans: ``routegate.plan`` over the run, ``routegate.step`` over each step.

Only a run for which :func:`routegate.core.telemetry.tracer` found a tracer opens any; the interpreter's lean path
never comes here. A step's span is opened before its target runs, so the target's own spans (an agent run, a
dispatch, an LLM call) hang below it, and closed once the step's routing is decided — after the target returned,
in the interpreter's next turn of the loop — which is why it is an :func:`~routegate.core.telemetry.open_span`
rather than a ``with`` block. Step spans carry the step's name, its iteration, the step it routed to and, when it
failed, its stop reason; never a payload, and never the text of a routing decision (``why`` may quote a field of
a step's output).
"""

from __future__ import annotations

from opentelemetry.trace import Span, Tracer

from routegate.core.telemetry import Attr, CurrentSpan, end_run, open_span, record_stop
from routegate.plan.envelope import Envelope
from routegate.plan.result import PlanResult

STEP_SPAN = "routegate.step"
PLAN_SPAN = "routegate.plan"


def plan_attributes(name: str | None) -> dict[str, str]:
    """The attributes a ``routegate.plan`` span starts with."""
    if name is None:
        return {Attr.RUNTIME: "plan"}
    return {Attr.RUNTIME: "plan", Attr.PLAN: name}


def begin_step(tr: Tracer, name: str, iteration: int) -> CurrentSpan:
    """Open the span of a step about to run (current until :func:`end_step`)."""
    return open_span(tr, STEP_SPAN, {Attr.STEP: name, Attr.ITERATION: iteration})


def end_step(
    opened: CurrentSpan,
    env: Envelope | None,
    decision: tuple[str | None, str] | None,
    exc: BaseException | None = None,
) -> None:
    """Close a step's span: where it routed to, the stop reason when the step failed (``env``/``decision`` are
    ``None`` when the run raised before the step ended)."""
    current = opened.span
    if current.is_recording():
        if decision is not None and decision[0] is not None:
            current.set_attribute(Attr.NEXT, decision[0])
        if env is not None and env.error is not None:
            record_stop(current, env.error.stop_reason)
    opened.close(exc)


def end_plan(root: Span, result: PlanResult, iterations: int | None = None) -> None:
    """Record how a Plan run ended on its ``routegate.plan`` span."""
    end_run(root, result.stop_reason, result.phase, **{Attr.STEPS: len(result.envelopes), Attr.ITERATIONS: iterations})
