"""One run's state, and the one place a deadline becomes a stop.

A :class:`RunState` is every run beyond the driver's lean branch (a run with nothing to watch has none): its
context, deadline, listener, spans and checkpoint, the path the interpreter appends to (envelopes and routing
decisions) and the step running now. The interpreter reads from here what it must watch between steps
(:meth:`RunState.between`); :meth:`RunState.out_of_time` turns the budget's ``max_seconds`` into the run's stop,
whether the deadline passed between steps or the timer cut a step off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from routegate.core.context import RunContext
from routegate.core.stop_reasons import MAX_ITERATIONS, MAX_SECONDS
from routegate.errors import RunStopError
from routegate.plan._compiled import Compiled
from routegate.plan._position import Decision, Position
from routegate.plan._spans import RunSpans
from routegate.plan.durable import DurableRun
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import MaxIterationsExceeded, path_text
from routegate.plan.events import PlanEvent, StepEvent
from routegate.plan.result import PlanResult

if TYPE_CHECKING:
    from routegate.plan.plan import Plan

_monotonic = time.monotonic  # the clock deadlines are read on (RunContext.deadline is on it too); tests set it


def deadline_after(seconds: float) -> float:
    """The deadline of a run with no context, starting now: ``seconds`` from now on the deadlines' clock."""
    return _monotonic() + seconds


class RunState:
    """One run beyond the lean branch (see the module docstring).

    ``deadline`` is on the ``time.monotonic()`` clock (``None``: the run has none of its own: no budget, or a run
    that is part of an outer run, whose timer bounds it); ``emit`` the listener of the run's final event (and of a
    runtime's own events, through the context); ``events`` where step events go (``None``: none are sent)."""

    __slots__ = (
        "at",
        "ctx",
        "deadline",
        "decisions",
        "durable",
        "emit",
        "envelopes",
        "events",
        "input",
        "max_seconds",
        "plan",
        "sent",
        "spans",
        "store",
        "watched",
    )

    def __init__(
        self,
        plan: Plan[Any, Any],
        value: Any,
        store: Any,
        ctx: RunContext[Any] | None,
        deadline: float | None,
        max_seconds: float | None,
        emit: Callable[[Any], None] | None,
        spans: RunSpans,
        step_events: bool = True,
    ) -> None:
        self.plan = plan
        self.input = value
        self.store = store
        self.ctx = ctx
        self.deadline = deadline
        self.max_seconds = max_seconds
        self.emit = emit
        self.events = emit if step_events else None
        self.spans = spans
        self.durable: DurableRun | None = None
        self.envelopes: list[Envelope] = []
        self.decisions: list[Decision] = []
        self.at = 0  # the step (or band) running now
        self.sent = 0  # step events emitted so far
        # the interpreter looks at the run between steps (one test per step when it need not)
        self.watched = deadline is not None or emit is not None or spans.watching

    def shares(self) -> bool:
        """Does a plan nested in this run share its context, deadline and spans (else it runs lean)?"""
        return self.ctx is not None or self.deadline is not None or self.spans.watching

    def between(self, step: Compiled, prev: Any, iterations: int, rejoin: Compiled | None) -> ErrorInfo | None:
        """What a watched run does before ``step`` runs: checkpoint the run (durable; ``rejoin``: the routing step
        whose rejoin is pending), send the step events decided so far, stop at the deadline (the stop, when it
        passed), and open the step's span."""
        durable = self.durable
        if durable is not None:
            self.checkpoint(step, prev, iterations, rejoin)
        if self.events is not None:
            self.flush()
        deadline = self.deadline
        if deadline is not None and _monotonic() >= deadline:
            return self.out_of_time(step.index)
        self.at = step.index
        spans = self.spans
        if spans.watching:
            spans.step(step, iterations + 1)
        return None

    def checkpoint(self, step: Compiled, prev: Any, iterations: int, rejoin: Compiled | None) -> None:
        """A durable run's checkpoint: where it stands before ``step`` runs."""
        assert self.durable is not None
        at = -1 if rejoin is None else rejoin.index
        self.durable.save(Position(step.index, prev, iterations, at, self.envelopes, self.decisions), self.store)

    def out_of_time(self, at: int, started: float | None = None) -> ErrorInfo:
        """The one deadline handler: the run's ``max_seconds`` passed before step ``at`` ran, or while it ran —
        the timer cancelled it: then ``started`` is when the run started, and the step (every member of its
        band) gets an envelope with the stop. The stop's phase is the step's ``phase`` (``"step"`` unless the
        plan is a runtime's that names its steps' phases)."""
        assert self.deadline is not None and self.max_seconds is not None
        compiled = self.plan._compiled
        step = compiled[at]
        path = path_text([env.step or "" for env in self.envelopes])
        cut: tuple[Compiled, ...] = ()
        # the run's time on its own clock: from when its context started (a runtime's context may have started
        # before this plan ran, e.g. a desk turn waiting for its session), else from when the run started
        elapsed = self.max_seconds + (_monotonic() - self.deadline)
        if started is None:
            message = (
                f"max_seconds={self.max_seconds} reached after {elapsed:.3f}s, before step {step.name!r} ran "
                f"(path so far: {path})"
            )
        else:
            cut = compiled[step.index : step.band_end] if step.band_end else (step,)
            names = ", ".join(repr(m.name) for m in cut)
            message = (
                f"max_seconds={self.max_seconds} reached after {elapsed:.3f}s; step {names} was cut off "
                f"(path so far: {path})"
            )
        phase = step.phase
        info = ErrorInfo("RunStopError", message, MAX_SECONDS, RunStopError(MAX_SECONDS, message, phase=phase), phase)
        if cut:
            assert started is not None
            step_ms = max((time.perf_counter() - started) * 1000.0 - sum(env.elapsed_ms for env in self.envelopes), 0.0)
            for member in cut:
                self.envelopes.append(Envelope(None, info, None, member.name, step_ms))
                self.decisions.append((None, MAX_SECONDS))
        return info

    def cut_off(self, started: float) -> PlanResult[Any]:
        """How the run ends when the timer cut off its running step (see :meth:`out_of_time`)."""
        stop = self.out_of_time(self.at, started)
        self.spans.close_step()  # the cut-off step's span, with its envelope
        run_id = None if self.ctx is None else self.ctx.run_id
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return PlanResult(self.input, None, stop, self.envelopes, self.decisions, self.store, elapsed_ms, run_id)

    def flush(self) -> None:
        """Emit a StepEvent for every step whose routing was decided since the last flush."""
        emit, decisions, envelopes = self.events, self.decisions, self.envelopes
        assert emit is not None
        while self.sent < len(decisions):
            index = self.sent
            self.sent = index + 1
            event: PlanEvent = StepEvent.of(index + 1, envelopes[index], decisions[index])
            emit(event)


def iterations_stop(limit: int, path: list[str], next_step: str) -> ErrorInfo:
    """The stop of a run that used up ``max_iterations``."""
    exc = MaxIterationsExceeded(limit, path, next_step)
    return ErrorInfo(type(exc).__name__, str(exc), MAX_ITERATIONS, exc, "step")


def plan_line(logger: logging.Logger, name: str | None, ended: PlanResult[Any]) -> None:
    """The one log line of a plan's run (the plan's, and by default a runtime's): its name, path, stop reason and
    latency; no payload."""
    logger.info(
        "plan %s path=%s stop_reason=%s latency_ms=%.3f",
        name or "-",
        ">".join(ended.path),
        ended.stop_reason,
        ended.elapsed_ms,
    )


__all__ = ["RunState", "deadline_after", "iterations_stop", "plan_line"]
