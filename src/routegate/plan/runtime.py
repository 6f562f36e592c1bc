"""``Runtime``: the one public seam between the Plan engine and a runtime built on it.

A runtime — the routing agent, the technique dispatcher, the support desk, one of your own — is a
:class:`~routegate.plan.Plan` whose runs end with the runtime's own result. It says so by subclassing
:class:`Runtime` and giving an instance to its plan (``Plan(..., runtime=...)``); it starts runs through the
runtime's doors. The engine does everything else — the loop, the budget's deadline, the stops, checkpoints, spans,
the final event — as for any plan.

What a runtime says (override):

* :meth:`Runtime.result` — how a run's result is made from its state (the payload the run started from), its
  ending — the plan's own :class:`~routegate.plan.PlanResult` (``outcome``, ``output``, ``error``: the stop as an
  :class:`~routegate.plan.ErrorInfo`; ``path``, ``envelopes``, ``trace``, ``run_id``, ``elapsed_ms``) — and its
  :class:`~routegate.core.RunContext` (its ``deps``, ledgers). Required.
* :meth:`Runtime.context` — the :class:`~routegate.core.RunContext` a run starts (default: one under the plan's
  budget, with the run's ``deps``).
* :meth:`Runtime.spans` — a traced run's spans (default: the plan's, ``routegate.plan`` with a ``routegate.step``
  per step); :class:`TracedSpans` with a root of the runtime's own.
* :meth:`Runtime.log` and :attr:`Runtime.logger` — its one log line per run (default: the plan's line,
  ``plan <name> path=... stop_reason=... latency_ms=...``, on the runtime's logger).
* :attr:`Runtime.step_events` — whether a streamed run sends a :class:`~routegate.plan.StepEvent` per step (the
  routing agent's stream carries its own events instead); :attr:`Runtime.returns_stops` — whether a step may end
  the run by *returning* its :class:`~routegate.errors.RunStopError` (as if it had raised it, without the cost of
  raising); :attr:`Runtime.owner` — what the plan is the plan of, in messages.

Its doors (call): :meth:`Runtime.arun` (``context=``: in a context the caller already started — its clock,
ledgers, tracer), :meth:`Runtime.run` (sync), :meth:`Runtime.iter` (streamed) and :meth:`Runtime.arun_step` (a
part of the run a plan step belongs to). See docs/plan.md, "Build a runtime".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic

from opentelemetry.trace import Tracer
from typing_extensions import TypeVar

from routegate.core._stream import stream_events
from routegate.core._sync import run_sync
from routegate.core.context import RunContext
from routegate.core.events import FinalEvent
from routegate.core.result import RunResult
from routegate.core.telemetry import tracer
from routegate.errors import ConfigurationError
from routegate.plan._driver import drive, start_context
from routegate.plan._run import plan_line
from routegate.plan._spans import PLAN_SPAN, Record, RunSpans, TracedSpans, plan_attributes
from routegate.plan.errors import PlanCompileError
from routegate.plan.result import PlanResult
from routegate.plan.targets import StepContext

if TYPE_CHECKING:
    from routegate.plan.plan import Plan

StateT = TypeVar("StateT", contravariant=True)
"""What a runtime's run starts from: the payload of its plan's first step (the agent's: the run's own state)."""
ResultT = TypeVar("ResultT", bound=RunResult[Any])
"""What a runtime's run ends with: a :class:`~routegate.core.RunResult` of its own (``AgentResult``, ...)."""
EventT = TypeVar("EventT", default=object)
"""What a runtime's run sends through its context (``ctx.send``) besides its final event; ``object`` unless said."""

_INFO = logging.INFO


class Runtime(Generic[StateT, ResultT, EventT]):
    """How a plan's runs become a runtime's runs: give one to ``Plan(..., runtime=...)``, then start runs through its
    doors (see the module docstring). One runtime is the runtime of one plan.

    Generic over the state a run starts from, the result it ends with and the events it sends, so every door is
    typed: ``Runtime[Order, OrderResult]``'s ``arun(order)`` returns an ``OrderResult``."""

    owner: str = "runtime"
    """What the plan is the plan of, in messages (``"RoutingAgent"``): "make the <owner> itself the step"."""
    logger: logging.Logger = logging.getLogger("routegate.plan.runtime")
    """The logger of the runtime's one line per run (:meth:`log` runs only when it is enabled for INFO)."""
    step_events: bool = True
    """A streamed run sends a StepEvent per step (``False``: only what its steps send, then the final event)."""
    returns_stops: bool = False
    """A step that returns a RunStopError ends the run exactly as if it had raised it (in any other plan a returned
    RunStopError is an ordinary output)."""

    _plan: Plan[Any, Any] | None = None

    # -- what a runtime says -----------------------------------------------------------------------------------
    def result(self, state: StateT, ended: PlanResult[Any], ctx: RunContext[Any]) -> ResultT:
        """The result of a run that started from ``state`` in ``ctx`` and ended as ``ended`` says (its ``error`` is
        the stop, ``None`` on success; ``output`` the last step's payload; ``path``, ``envelopes``, ``trace``,
        ``run_id``, ``elapsed_ms``). Called once per run, even when the deadline cut it off or it used up
        ``max_iterations``."""
        raise NotImplementedError(f"{type(self).__name__} must define result(state, ended, ctx)")

    def context(self, state: StateT, deps: Any, emit: Callable[[Any], None] | None) -> RunContext[Any]:
        """The context a run of its own starts (``emit``: the listener of a streamed run, ``None`` otherwise):
        by default under the plan's budget (its deadline and delegation ledger), its ``deps`` the door's."""
        return start_context(deps, self.plan.budget, emit, tracer())

    def spans(self, tracer: Tracer, state: StateT, ctx: RunContext[Any]) -> RunSpans:
        """The spans of a traced run (``tracer`` is its context's): by default the plan's, ``routegate.plan`` with a
        ``routegate.step`` span per step. A runtime with a root of its own returns
        ``TracedSpans(tracer, "myapp.run", {...}, record=..., steps=False)``."""
        return TracedSpans(tracer, PLAN_SPAN, plan_attributes(self.plan.name))

    def log(self, result: ResultT, ended: PlanResult[Any]) -> None:
        """The run's one log line (only when :attr:`logger` is enabled for INFO): by default the plan's."""
        plan_line(self.logger, self.plan.name, ended)

    # -- its doors ---------------------------------------------------------------------------------------------
    async def arun(self, state: StateT, *, deps: Any = None, context: RunContext[Any] | None = None) -> ResultT:
        """Run the plan from ``state`` and return the runtime's result.

        The run starts its own context (:meth:`context`), unless the caller gives one it started earlier
        (``context``: a desk turn's, started when the turn arrived so that waiting for its session counts): then the
        run is in it — its deps, run id, ledgers, tracer and clock (the plan's budget bounds the run on
        ``context.deadline``) — and sends no final event (the caller sends its own, when it is done)."""
        if context is not None and deps is not None:
            raise ConfigurationError("arun() takes deps= or context= (whose deps the run uses), not both")
        return await drive(self.plan, self._finish, state, deps=deps, context=context)

    def run(self, state: StateT, *, deps: Any = None) -> ResultT:
        """Synchronous :meth:`arun` (not from inside a running event loop)."""
        return run_sync(drive(self.plan, self._finish, state, deps=deps), "run")

    def iter(self, state: StateT, *, deps: Any = None) -> AsyncIterator[EventT | FinalEvent[ResultT]]:
        """Run the plan from ``state``, yielding what the run sends as it happens (its steps' events, its step
        events when :attr:`step_events`), the last one a :class:`~routegate.core.FinalEvent` with the result.
        Closing the iterator early cancels the run."""

        def start(emit: Callable[[EventT | FinalEvent[ResultT]], None]) -> Coroutine[Any, Any, ResultT]:
            return drive(self.plan, self._finish, state, deps=deps, emit=emit)

        return stream_events(start, _is_final)

    async def arun_step(self, state: StateT, step: StepContext) -> ResultT:
        """Run the plan from ``state`` as a part of the run the plan step ``step`` belongs to: it shares that run's
        id, deps, deadline (the outer run's timer cuts it off; the plan's own ``max_seconds`` does not apply),
        delegation and provenance ledgers and tracer (its spans hang below the step's), and sends no events of its
        own. A step context made by hand, outside a run, gets a run of its own (:meth:`arun`)."""
        outer = step.run
        if outer is None:
            return await self.arun(state)
        within = RunContext(
            outer.deps, outer.run_id, outer.deadline, outer.ledger, None, outer.tracer, outer.provenance, outer.spans
        )
        return await drive(self.plan, self._finish, state, context=within, own_deadline=False)

    # -- the engine's side -------------------------------------------------------------------------------------
    @property
    def plan(self) -> Plan[Any, Any]:
        """The plan this is the runtime of."""
        plan = self._plan
        if plan is None:
            raise ConfigurationError(f"{type(self).__name__} is the runtime of no plan yet: Plan(..., runtime=it)")
        return plan

    def _bind(self, plan: Plan[Any, Any]) -> None:
        """``plan`` is the plan of this runtime (once)."""
        if self._plan is not None:
            raise PlanCompileError(
                f"{type(self).__name__} is already the runtime of {self._plan!r}: give each plan a runtime of its own"
            )
        self._plan = plan

    def _finish(self, ended: PlanResult[Any], ctx: RunContext[Any] | None) -> ResultT:
        """A run ended: the runtime's result, and its one log line."""
        assert ctx is not None  # a runtime's run always has a context
        result = self.result(ended.input, ended, ctx)
        if self.logger.isEnabledFor(_INFO):
            self.log(result, ended)
        return result


def _is_final(event: object) -> bool:
    return isinstance(event, FinalEvent)


__all__ = ["EventT", "Record", "ResultT", "RunSpans", "Runtime", "StateT", "TracedSpans"]
