"""The doors of an agent whose run starts from a goal — ``arun``, ``run``, ``iter`` and ``run_step`` — written once
for the routing agent and the tool agent. Each door builds the run's first state from the goal and hands it to the
agent's :class:`~routegate.plan.Runtime`; the agent says only how its state is made (:meth:`GoalDoors._state`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Generic

from typing_extensions import TypeVar

from routegate.core.context import RunDepsT
from routegate.core.events import FinalEvent
from routegate.core.result import RunResult
from routegate.plan.envelope import StepFailedError, payload_text
from routegate.plan.runtime import Runtime
from routegate.plan.targets import StepContext

StateT = TypeVar("StateT")
"""The agent's run state, the plan's payload from step to step."""
ResultT = TypeVar("ResultT", bound=RunResult[Any])
"""What the agent's runs return."""
EventT = TypeVar("EventT")
"""What the agent's runs send before their final event."""

_NO_CONTEXT: Mapping[str, Any] = {}


class GoalDoors(Generic[StateT, ResultT, EventT, RunDepsT]):
    """An agent's doors into its runtime. A subclass sets ``_runtime`` and makes a run's first state
    (:meth:`_state`)."""

    _runtime: Runtime[StateT, ResultT, EventT]

    def _state(self, goal: object, context: Mapping[str, Any], task: str | None) -> StateT:
        """A run's first state: the goal, the caller's context, the plan step's ``task=`` (``None`` outside one)."""
        raise NotImplementedError

    async def arun(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
    ) -> ResultT:
        """Run one request to its end (its answer or its stop) and return how it ended."""
        return await self._runtime.arun(self._state(goal, context or _NO_CONTEXT, None), deps=deps)

    def run(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # see arun
    ) -> ResultT:
        """Synchronous :meth:`arun` (not from inside a running event loop)."""
        return self._runtime.run(self._state(goal, context or _NO_CONTEXT, None), deps=deps)

    def iter(
        self,
        goal: str,
        *,
        context: Mapping[str, Any] | None = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # see arun
    ) -> AsyncIterator[EventT | FinalEvent[ResultT]]:
        """Run one request, yielding its events as they happen (the agent's class docstring names them); the last
        one is a :class:`~routegate.core.FinalEvent` carrying the result. Closing the iterator early cancels the
        run."""
        return self._runtime.iter(self._state(goal, context or _NO_CONTEXT, None), deps=deps)

    async def run_step(self, payload: Any, ctx: StepContext) -> ResultT:
        """The agent as a step of a plan (``Step(agent)``): the step's input, as text, is the goal and its ``task=``
        the agent's instruction; the run is a nested run of the agent's plan inside the plan's run, sharing its id,
        deadline (the outer run's timer cuts the agent off; the agent's own ``budget.max_seconds`` does not apply),
        delegation and provenance ledgers, tracer (the agent's root span sits under the step's) and ``deps``, and
        sends no events of its own. A run that succeeds is the step's payload (its result); a run that stops fails
        the step with its stop reason, message and phase, its result in the envelope's ``metadata["agent"]``."""
        result = await self._runtime.arun_step(self._state(payload_text(payload), _NO_CONTEXT, ctx.task), ctx)
        outcome = result.outcome
        if not outcome.ok:
            raise StepFailedError.stopped(outcome, {"agent": result})
        return result


__all__ = ["GoalDoors"]
