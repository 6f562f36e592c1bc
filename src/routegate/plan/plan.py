"""``Plan``: a declared list of steps with explicit, validated routing between them.

Everything is worked out when the plan is built (step index, route tables, predicate lists, target kinds,
validators, which steps ask for the run's :class:`~routegate.core.RunContext`), so a run is one loop: resolve the
step's input, call its target, wrap the output in an :class:`Envelope`, pick the next step.

This module is the plan's API and its checks; a run goes through the engine's other modules, one idea each:
the driver (:mod:`routegate.plan._driver`: every run starts and ends there), the run's state and the deadline
handler (:mod:`routegate.plan._run`), the interpreter's loop (:mod:`routegate.plan._interpreter`), the one step
call (:mod:`routegate.plan._call`) and parallel bands (:mod:`routegate.plan._bands`). A runtime built on the engine
(the routing agent, the technique dispatcher, a user's own) gives the plan its :class:`~routegate.plan.Runtime`
and starts its runs through the runtime's doors.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import Any, Generic

from routegate._lazy import renamed_method
from routegate.core._stream import stream_events
from routegate.core._sync import run_sync
from routegate.core.context import RunContext, RunDepsT
from routegate.core.contracts import Budget
from routegate.core.events import FinalEvent
from routegate.core.result import OutputT
from routegate.errors import ConfigurationError
from routegate.plan._compiled import STEP, compile_steps, is_sync, shape_of, wants_context
from routegate.plan._driver import drive, drive_nested
from routegate.plan._fork import fork
from routegate.plan._run import RunState, plan_line
from routegate.plan._shape import PlanShape
from routegate.plan.diagram import Diagram, diagram_of
from routegate.plan.durable import NO_ANSWER
from routegate.plan.errors import PlanCompileError
from routegate.plan.events import PlanEvent
from routegate.plan.history import NO_PAYLOAD, RunHistory, read_history
from routegate.plan.result import PlanResult
from routegate.plan.runtime import Runtime
from routegate.plan.step import Step
from routegate.plan.store import Store

_logger = logging.getLogger(__name__)
_INFO = logging.INFO
_DEFAULT_ITERATIONS = Budget().max_iterations


class Plan(Generic[RunDepsT, OutputT]):
    """A plan: ``Plan(Step(...), Step(...), ..., budget=Budget(...))``; validated here, run with ``arun``/``run``.

    Generic over the ``deps`` its runs take and the output of its last step, for the type checker:
    ``Plan[MyDeps, Answer](...)`` runs take ``deps: MyDeps`` and return a ``PlanResult[Answer]`` whose ``output``
    is ``Answer | None``. Unsubscripted, both are ``Any`` (steps are not checked against either).

    * ``budget`` — a :class:`~routegate.core.Budget`: ``max_seconds`` is the run's deadline (a step still running
      when it passes is cut off and the run stops with ``max_seconds``) and ``max_iterations`` the most steps one
      run may execute (a parallel band counts once; a run that needs more stops with ``max_iterations``, the
      safety net for routing loops). Without a budget a run has no deadline and at most 100 steps.
    * ``max_iterations`` — shorthand for ``budget=Budget(max_iterations=...)``'s step bound, without a deadline.
    * ``store`` — the :class:`~routegate.plan.Store` that ``writes=`` go to (a run may pass its own); without
      one, a plan whose steps write gets a fresh store per run, returned as ``result.store``.
    * ``strict`` — the detour trap (a forward route without ``after_branches=`` to a step that is not the last)
      is a :class:`PlanCompileError` instead of a :class:`DetourTrapWarning`.
    * ``targets`` — what string targets name: ``Step("search")`` runs ``targets["search"]``.
    * ``name`` — the step name this plan gets when nested in another plan.
    * ``checkpoint_key`` — makes runs durable: a checkpoint after every step in ``store``'s backend
      (``Store()`` in memory, ``Store(db="plans.sqlite")``, ``Store(db="postgresql://...")``); a run may pass its
      own key. ``resume`` (default ``True``) continues the key's last run where it stopped; ``on_concurrent``
      says what a run does when a live run holds its key: ``"fail"`` (default) or ``"fork"``. See docs/plan.md,
      "Durable runs".
    * ``runtime`` — the :class:`~routegate.plan.Runtime` this plan is the plan of: its runs are the runtime's
      (its result, spans, log line and events) and start through the runtime's doors; the plan's own ``arun`` /
      ``run`` / ``iter`` refuse, and the plan is not a step of another plan (the runtime's owner is). See
      docs/plan.md, "Build a runtime".

    Construction raises :class:`PlanCompileError` for any invalid graph, before anything runs.
    """

    def __init__(
        self,
        *steps: Step,
        max_iterations: int | None = None,
        budget: Budget | None = None,
        store: Any = None,
        strict: bool = False,
        name: str | None = None,
        targets: Mapping[str, Any] | None = None,
        checkpoint_key: str | None = None,
        resume: bool = True,
        on_concurrent: str = "fail",
        runtime: Runtime[Any, Any, Any] | None = None,
    ) -> None:
        if not steps:
            raise PlanCompileError("a Plan needs at least one Step")
        for index, step in enumerate(steps):
            if not isinstance(step, Step):
                raise PlanCompileError(
                    f"Plan arguments must be Step objects; argument {index} is {step!r} (wrap it: Step(x, name=...))"
                )
        if max_iterations is not None and (
            isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1
        ):
            raise PlanCompileError(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
        if budget is not None:
            if not isinstance(budget, Budget):
                raise PlanCompileError(f"budget= must be a routegate.core.Budget, got {budget!r}")
            if max_iterations is not None and max_iterations != budget.max_iterations:
                raise PlanCompileError(
                    f"max_iterations={max_iterations} disagrees with budget.max_iterations={budget.max_iterations}; "
                    "give the bound once: Budget(max_iterations=...)"
                )
        if store is not None and not callable(getattr(store, "write", None)):
            raise PlanCompileError(f"store= must have a write(key, value) method (a Store), got {store!r}")
        if name is not None and (not isinstance(name, str) or not name):
            raise PlanCompileError(f"Plan name= must be a non-empty string, got {name!r}")
        if checkpoint_key is not None and (not isinstance(checkpoint_key, str) or not checkpoint_key):
            raise PlanCompileError(f"checkpoint_key= must be a non-empty string, got {checkpoint_key!r}")
        if on_concurrent not in ("fail", "fork"):
            raise PlanCompileError(f"on_concurrent= must be 'fail' or 'fork', got {on_concurrent!r}")
        if not isinstance(resume, bool):
            raise PlanCompileError(f"resume= must be True or False, got {resume!r}")
        if runtime is not None and not isinstance(runtime, Runtime):
            raise PlanCompileError(f"runtime= must be a routegate.plan.Runtime, got {runtime!r}")
        self.checkpoint_key = checkpoint_key
        self.resume = resume
        self.on_concurrent = on_concurrent
        self._checkpoints: Store | None = None  # the in-memory checkpoints of a durable plan without a Store
        self._checkpoint_shape: PlanShape | None = None  # what checkpoints know of the steps; on the first durable run
        self.steps: tuple[Step, ...] = steps
        self.budget = budget
        if budget is not None:
            self.max_iterations = budget.max_iterations
        else:
            self.max_iterations = _DEFAULT_ITERATIONS if max_iterations is None else max_iterations
        self.store = store
        self.strict = strict
        self.name = name
        returns_stops = runtime is not None and runtime.returns_stops
        self._compiled = compile_steps(steps, targets, strict, Plan, returns_stops)
        self._names = tuple(step.name for step in steps)
        self._has_writes = any(step.writes is not None for step in steps)
        self._uses_from_step = any(c.source >= STEP for c in self._compiled)
        # a plan of synchronous steps never suspends: no timer could fire before its run ended, so its deadline is
        # checked between steps only, and ``run`` drives it without an event loop
        self._all_sync = all(is_sync(c) for c in self._compiled)
        self._wants_ctx = any(wants_context(c) for c in self._compiled)
        # no budget and no step that asks for the context: the driver's lean branch (the interpreter alone)
        self._lean = budget is None and not self._wants_ctx and checkpoint_key is None
        self.runtime: Runtime[Any, Any, Any] | None = None
        if runtime is not None:
            runtime._bind(self)
            self.runtime = runtime

    @property
    def step_names(self) -> tuple[str, ...]:
        return self._names

    def diagram(self, path: Iterable[str] = (), stop_reason: str | None = None) -> Diagram:
        """The plan's graph as a :class:`~routegate.plan.diagram.Diagram`: plain data (``to_dict()``), drawn as
        Mermaid (``mermaid()``) or Graphviz (``dot()``). ``path``: the steps a run executed (``result.path``),
        drawn on it, with ``stop_reason`` (``result.stop_reason``) saying whether it reached the end or stopped
        at its last step. See docs/plan.md, "Seeing a plan"."""
        drawn = diagram_of(self)
        names = tuple(path)
        return drawn.with_path(names, stop_reason) if names else drawn

    # -- a durable run's history, and re-running from it -------------------------------------------------------
    def history(self, key: str, *, store: Any = None) -> RunHistory:
        """The checkpoints the durable run ``key`` wrote, in order (:class:`~routegate.plan.history.RunHistory`):
        each one's number, time, the step about to run, how the run got there, the payload handed to it and its
        hashes. Read from ``store``'s checkpoints, else the plan's (as a run of ``key`` would). See docs/plan.md,
        "Run history and time travel"."""
        backend, _ = self._backend(store)
        return read_history(backend, key)

    async def afork(
        self,
        key: str,
        *,
        at: int | None = None,
        step: str | None = None,
        payload: Any = NO_PAYLOAD,
        answer: Any = NO_ANSWER,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
    ) -> PlanResult[OutputT]:
        """Re-run the durable run ``key`` from its checkpoint number ``at`` (or from the latest checkpoint about
        to run ``step``) as a new run, and return how the new run ended. The new run's key is ``checkpoint_key``,
        else ``"<key>/at-<at>-<8 hex digits>"`` (``result.checkpoint_key``); its checkpoints name their parent
        (``plan.history(new_key).parent``); the run ``key`` is not touched and keeps resuming as before.

        ``payload`` replaces what the step about to run receives from the step before it (the run's input, at the
        first checkpoint): it must validate as the producing step's ``output=`` type and the receiving function's
        annotated input type (:class:`~routegate.errors.ConfigurationError` otherwise). ``answer`` answers the
        question of a paused run's checkpoint. The checkpoint is checked like any resumed one (signature, plan,
        graph): a tampered one raises :class:`~routegate.plan.CheckpointMismatchError`."""
        if self.runtime is not None:
            raise self._refused("afork")
        return await fork(self, key, at, step, payload, answer, store, deps, checkpoint_key)

    def fork(
        self,
        key: str,
        *,
        at: int | None = None,
        step: str | None = None,
        payload: Any = NO_PAYLOAD,
        answer: Any = NO_ANSWER,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
    ) -> PlanResult[OutputT]:
        """Synchronous :meth:`afork` (not from inside a running event loop)."""
        if self.runtime is not None:
            raise self._refused("fork")
        coroutine = fork(self, key, at, step, payload, answer, store, deps, checkpoint_key)
        return run_sync(coroutine, "fork", self._all_sync)

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"Plan({label}steps={list(self._names)}, max_iterations={self.max_iterations})"

    # -- public API: three doors into the one driver -----------------------------------------------------------
    async def arun(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
        context: RunContext[RunDepsT] | None = None,
    ) -> PlanResult[OutputT]:
        """Run the plan on ``payload`` (the first step's input) and return how it ended.

        ``deps`` becomes ``ctx.deps`` of every step that declares a :class:`~routegate.core.RunContext` parameter.
        ``checkpoint_key`` makes this run durable under that key (default: the plan's); ``answer`` resumes an
        interrupted durable run, handing the answer to the step that asked (see :func:`routegate.plan.interrupt`).
        When resuming, ``payload`` may be ``None``: the checkpointed input is used. ``context``: a context the
        caller started earlier (so that what it waited for counts against the run's deadline): the run is in it —
        its deps, run id, ledgers, tracer and clock (the budget's deadline is ``context.deadline``).
        """
        if self.runtime is not None:
            raise self._refused("arun")
        if context is not None and deps is not None:
            raise ConfigurationError("arun() takes deps= or context= (whose deps the run uses), not both")
        return await drive(
            self, self._ended, payload, store, deps=deps, key=checkpoint_key, answer=answer, context=context
        )

    def run(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> PlanResult[OutputT]:
        """Synchronous :meth:`arun` (not from inside a running event loop), through the one sync bridge.

        A plan whose targets are all synchronous never suspends, so the bridge drives it right here with no event
        loop; the deadline of its budget is then checked between steps (a running synchronous step cannot be cut
        off). Any other plan runs on the per-thread loop of :func:`routegate.core._sync.run_sync`.
        """
        if self.runtime is not None:
            raise self._refused("run")
        return run_sync(
            drive(self, self._ended, payload, store, deps=deps, key=checkpoint_key, answer=answer),
            "run",
            self._all_sync,
        )

    def iter(
        self,
        payload: Any = None,
        *,
        store: Any = None,
        deps: RunDepsT = None,  # type: ignore[assignment]  # a run given no deps gets None
        checkpoint_key: str | None = None,
        answer: Any = NO_ANSWER,
    ) -> AsyncIterator[PlanEvent]:
        """Run the plan, yielding a :class:`~routegate.plan.StepEvent` per executed step as its routing is
        decided, then a :class:`~routegate.core.FinalEvent` with the result. Closing the iterator early
        cancels the run."""
        if self.runtime is not None:
            raise self._refused("iter")

        def start(emit: Callable[[PlanEvent], None]) -> Coroutine[Any, Any, PlanResult[OutputT]]:
            return drive(self, self._ended, payload, store, deps=deps, emit=emit, key=checkpoint_key, answer=answer)

        return stream_events(start, _is_final)

    astream = renamed_method(iter, "Plan", "astream")

    def _refused(self, door: str) -> ConfigurationError:
        """A door of the plan's own, used on a plan whose runs are a runtime's."""
        owner = self.runtime.owner if self.runtime is not None else "runtime"
        return ConfigurationError(
            f"{door}() of {self!r}: this is the plan of a {owner}, whose runs end with its own result; "
            f"run the {owner} instead"
        )

    # -- what the engine's modules read of the plan ------------------------------------------------------------
    def _ended(self, ended: PlanResult[Any], ctx: RunContext[Any] | None) -> PlanResult[Any]:
        """A run of the plan's own ended: its result is how it ended, and its one log line."""
        if _logger.isEnabledFor(_INFO):
            plan_line(_logger, self.name, ended)
        return ended

    def _run_nested(self, value: Any, store: Any, outer: RunState | None) -> Coroutine[Any, Any, PlanResult[Any]]:
        """A run of this plan as a step of the run ``outer`` (its store, unless the plan has its own)."""
        return drive_nested(self, value, store if self.store is None else self.store, outer)

    def _store_for(self, store: Any) -> Any:
        """The store a run writes to: the one it was given, else the plan's, else a fresh one when a step writes."""
        if store is None:
            store = self.store
            if store is None and self._has_writes:
                store = Store()
        return store

    def _backend(self, store: Any) -> tuple[Any, bytes | None]:
        """The checkpoint backend of a durable run and the key that signs its checkpoints: its store's, else the
        plan's, else one in this process (unsigned)."""
        for candidate in (store, self.store):
            if candidate is not None:
                backend = getattr(candidate, "checkpoints", None)
                if backend is None:
                    raise ConfigurationError(
                        f"a durable run keeps its checkpoints in a routegate.plan.Store; {candidate!r} is not one "
                        "(pass store=Store(db=...))"
                    )
                secret = getattr(candidate, "signing_key", None)
                return backend, secret if isinstance(secret, bytes) else None
        if self._checkpoints is None:
            self._checkpoints = Store()
        return self._checkpoints.checkpoints, None

    def _shape(self) -> PlanShape:
        """What a durable run's checkpoints know of this plan (built on its first durable run)."""
        shape = self._checkpoint_shape
        if shape is None:
            shape = self._checkpoint_shape = shape_of(self._compiled)
        return shape


def _is_final(event: PlanEvent) -> bool:
    return isinstance(event, FinalEvent)


__all__ = ["Plan"]
