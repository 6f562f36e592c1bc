"""The routing agent: Route → Validate → Delegate → (reroute) → Finalize, under budgets, with a trace.

This module is wiring: the policy boundary (:mod:`.policy`), the gateway (:mod:`.gateway`) and the router and
finalizer protocols (:mod:`.protocols`) do the work. Every run returns a :class:`RunResult`; none raises for
bad model output, bad input, budgets, loops or timeouts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from typing import Any

from pydantic import BaseModel

from routegate.core import stop_reasons as sr
from routegate.core._deadline import Deadline
from routegate.core._sync import run_sync
from routegate.core.compose import GroundedComposer
from routegate.core.contracts import (
    OBSERVATION_STATUSES,
    Budget,
    HistoryEntry,
    RouteIntent,
    RouteSpec,
    RunResult,
    TraceEntry,
)
from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent, RunEvent
from routegate.core.gateway import DelegationLedger, DelegationStop, RouteGateway
from routegate.core.hashing import args_hash
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest, RouteDecision, Router, RouteRequest
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError

logger = logging.getLogger(__name__)

Emit = Callable[[RunEvent], None]
MAX_GOAL_CHARS = 32_000


def _as_mapping(value: object) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return None


class _Run:
    """Mutable state of one run; turns endings into :class:`RunResult` values."""

    __slots__ = ("context", "emit", "goal", "history", "phase", "run_id", "started", "trace")

    def __init__(self, goal: str, context: Mapping[str, Any], emit: Emit | None) -> None:
        self.goal = goal
        self.context = context
        self.emit = emit
        self.run_id = os.urandom(8).hex()
        self.started = time.perf_counter()
        self.phase: sr.Phase = "route"
        self.history: list[HistoryEntry] = []
        self.trace: list[TraceEntry] = []

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0

    def stop(self, stop_reason: str, message: str, *, phase: sr.Phase | None = None, **fields: Any) -> RunResult:
        return RunResult(
            status="stopped",
            stop_reason=stop_reason,
            phase=phase or self.phase,
            run_id=self.run_id,
            goal=self.goal,
            trace=tuple(self.trace),
            history=tuple(self.history),
            message=message,
            elapsed_ms=self.elapsed_ms(),
            **fields,
        )


class RoutingAgent:
    """A governed routing agent over a set of workers.

    ``policy_allow`` is the allowlist the policy boundary applies to router decisions
    (``invalid_route:route_not_allowed:<t>``); ``execution_allow`` is the gateway's, applied again at
    execution (``route_denied:<t>``). Both default to the workers' names; anything else is denied.
    """

    def __init__(
        self,
        *,
        workers: Sequence[Worker],
        router: Router,
        finalizer: Finalizer | None = None,
        budget: Budget | None = None,
        policy_allow: Iterable[str] | None = None,
        execution_allow: Iterable[str] | None = None,
        name: str = "routing-agent",
    ) -> None:
        if not isinstance(router, Router):
            raise ConfigurationError(f"router must have an async decide(request) method, got {type(router).__name__}")
        names = [w.name for w in workers]
        self.name = name
        self.router = router
        self.finalizer: Finalizer = finalizer or GroundedComposer()
        self.budget = budget or Budget()
        self.gateway = RouteGateway(allow=names if execution_allow is None else execution_allow, registry=workers)
        allowed = frozenset(names if policy_allow is None else policy_allow)
        self.policy = RoutePolicy(allowed, {w.name: w.schema for w in workers})
        self.catalog = tuple(
            RouteSpec(w.name, w.description, w.schema.model_json_schema()) for w in workers if w.name in allowed
        )

    # -- public API ------------------------------------------------------------------------------------------
    async def arun(self, goal: str, *, context: Mapping[str, Any] | None = None) -> RunResult:
        """Run one request to its end and return how it ended."""
        return await self._execute(goal, context or {}, None)

    def run(self, goal: str, *, context: Mapping[str, Any] | None = None) -> RunResult:
        """Synchronous :meth:`arun` (not from inside a running event loop)."""
        return run_sync(self.arun(goal, context=context), what="run")

    async def astream(self, goal: str, *, context: Mapping[str, Any] | None = None) -> AsyncIterator[RunEvent]:
        """Run one request, yielding its events as they happen; the last one is a :class:`FinalEvent`."""
        queue: asyncio.Queue[RunEvent | BaseException] = asyncio.Queue()

        async def produce() -> None:
            try:
                await self._execute(goal, context or {}, queue.put_nowait)
            except BaseException as exc:  # surfaced to the consumer below, then re-raised here
                queue.put_nowait(exc)
                raise

        task = asyncio.create_task(produce())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, FinalEvent):
                    return
        finally:
            if not task.done():
                task.cancel()
            with suppress(BaseException):
                await task

    # -- the loop --------------------------------------------------------------------------------------------
    async def _execute(self, goal: str, context: Mapping[str, Any], emit: Emit | None) -> RunResult:
        run = _Run(goal if isinstance(goal, str) else "", context, emit)
        deadline = Deadline(self.budget.max_seconds)
        try:
            async with deadline:
                result = await self._loop(run, goal)
        except TimeoutError:
            if not deadline.expired:
                raise
            result = run.stop(
                sr.MAX_SECONDS,
                f"max_seconds={self.budget.max_seconds} reached after {run.elapsed_ms() / 1000:.3f}s "
                f"in phase {run.phase!r}",
            )
        logger.info(
            "run %s route=%s stop_reason=%s latency_ms=%.2f",
            result.run_id,
            result.selected_route or (result.route.target if result.route else None),
            result.stop_reason,
            result.elapsed_ms,
        )
        if emit is not None:
            emit(FinalEvent(result))
        return result

    async def _loop(self, run: _Run, goal: object) -> RunResult:
        if not isinstance(goal, str) or not goal.strip():
            return run.stop("invalid_goal:empty", "the request is empty: send a non-blank text")
        if len(goal) > MAX_GOAL_CHARS:
            return run.stop("invalid_goal:too_long", f"the request has {len(goal)} characters, over {MAX_GOAL_CHARS}")
        budget = self.budget
        ledger = DelegationLedger(budget.max_delegations)
        history, trace, emit = run.history, run.trace, run.emit
        for attempt in range(1, budget.max_route_attempts + 1):
            attempt_started = time.perf_counter()
            previous = history[-1] if history else None
            previous_target = previous.route.target if previous else None
            previous_status = previous.status if previous else None
            forbidden = (
                frozenset({previous_target})
                if previous_status == "needs_reroute" and previous_target is not None
                else frozenset()
            )
            run.phase = "route"
            request = RouteRequest(
                goal=goal,
                catalog=self.catalog,
                history=tuple(history),
                forbidden_targets=forbidden,
                attempt=attempt,
                budget=budget,
                context=run.context,
            )
            try:
                answered: object = await self.router.decide(request)
            except RunStopError as stop:
                return run.stop(stop.stop_reason, stop.message, phase=_phase(stop.phase))
            except Exception as exc:
                logger.warning("router %s raised %s", type(self.router).__name__, type(exc).__name__, exc_info=True)
                return run.stop(sr.router_error(exc), f"the router raised {type(exc).__name__} (details in the log)")
            # a router that returns a bare value instead of a RouteDecision is tolerated: it is all untrusted
            decision = answered if isinstance(answered, RouteDecision) else RouteDecision(raw=answered)
            verdict = self.policy.validate(
                decision.raw, previous_target=previous_target, previous_status=previous_status
            )
            if isinstance(verdict, RouteRejection):
                if emit is not None:
                    emit(DecisionEvent(attempt, decision, None, verdict.stop_reason))
                trace.append(
                    _trace(
                        attempt,
                        None,
                        attempt_started,
                        decision,
                        ok=False,
                        phase="route",
                        stop=verdict.stop_reason,
                    )
                )
                return run.stop(verdict.stop_reason, verdict.message, raw_route=decision.raw)
            if emit is not None:
                emit(DecisionEvent(attempt, decision, verdict))

            run.phase = "delegate"
            target = verdict.target
            digest = args_hash(verdict.args)
            if emit is not None:
                emit(DelegationEvent(attempt, target, digest))
            try:
                outcome = await self.gateway.delegate(verdict, ledger, digest=digest)
            except RunStopError as stop:
                trace.append(
                    _trace(
                        attempt,
                        target,
                        attempt_started,
                        decision,
                        ok=False,
                        digest=digest,
                        stop=stop.stop_reason,
                    )
                )
                return run.stop(stop.stop_reason, stop.message, phase=_phase(stop.phase), route=verdict)
            if isinstance(outcome, DelegationStop):
                trace.append(
                    _trace(
                        attempt,
                        target,
                        attempt_started,
                        decision,
                        ok=False,
                        digest=digest,
                        stop=outcome.stop_reason,
                    )
                )
                return run.stop(outcome.stop_reason, outcome.message, route=verdict)
            value = outcome.value
            if emit is not None:
                emit(ObservationEvent(attempt, target, value))
            observation = _as_mapping(value)
            status = observation.get("status") if observation is not None else None
            if observation is not None:
                history.append(HistoryEntry(attempt, verdict, observation))
            domain = observation.get("domain") if observation is not None else None
            trace.append(
                _trace(
                    attempt,
                    target,
                    attempt_started,
                    decision,
                    ok=True,
                    digest=digest,
                    status=status if isinstance(status, str) else None,
                    domain=domain if isinstance(domain, str) else None,
                )
            )
            if status == "needs_reroute":
                continue
            if status != "done":
                return run.stop(
                    sr.ROUTE_BAD_OBSERVATION,
                    f"worker {target!r} returned status {status!r}; expected one of {list(OBSERVATION_STATUSES)}",
                    route=verdict,
                    expected_statuses=OBSERVATION_STATUSES,
                    received_status=status,
                    bad_observation=value,
                )
            return await self._finalize(run, goal, verdict)
        return run.stop(
            sr.MAX_ROUTE_ATTEMPTS,
            f"max_route_attempts={budget.max_route_attempts} used up without a 'done' observation",
            phase="route",
        )

    async def _finalize(self, run: _Run, goal: str, route: RouteIntent) -> RunResult:
        run.phase = "finalize"
        request = FinalizeRequest(goal, route.target, tuple(run.history), run.context)
        try:
            answer: object = await self.finalizer.finalize(request)
        except RunStopError as stop:
            return run.stop(stop.stop_reason, stop.message, phase=_phase(stop.phase), route=route)
        except Exception as exc:
            logger.warning("finalizer raised %s", type(exc).__name__, exc_info=True)
            return run.stop(
                sr.finalize_error(exc), f"the finalizer raised {type(exc).__name__} (details in the log)", route=route
            )
        extra: Mapping[str, Any] = {}
        if isinstance(answer, FinalAnswer):
            extra = answer.extra
            answer = answer.text
        if not isinstance(answer, str) or not answer.strip():
            return run.stop(sr.LLM_EMPTY, "the finalizer returned an empty answer", route=route)
        return RunResult(
            status="ok",
            stop_reason=sr.SUCCESS,
            phase=None,
            run_id=run.run_id,
            goal=run.goal,
            selected_route=route.target,
            answer=answer.strip(),
            trace=tuple(run.trace),
            history=tuple(run.history),
            route=route,
            elapsed_ms=run.elapsed_ms(),
            extra=extra,
        )


def _phase(value: str | None) -> sr.Phase | None:
    if value in ("route", "delegate", "finalize"):
        return value  # type: ignore[return-value]  # narrowed by the membership test
    return None


def _trace(
    attempt: int,
    target: str | None,
    started: float,
    decision: RouteDecision,
    *,
    ok: bool,
    phase: sr.Phase = "delegate",
    digest: str | None = None,
    stop: str | None = None,
    status: str | None = None,
    domain: str | None = None,
) -> TraceEntry:
    return TraceEntry(
        attempt=attempt,
        target=target,
        ok=ok,
        phase=phase,
        elapsed_ms=round((time.perf_counter() - started) * 1000.0, 3),
        args_hash=digest,
        stop_reason=stop,
        observation_status=status,
        domain=domain,
        decided_by=decision.decided_by or None,
        scores=decision.scores,
        why=decision.why or None,
    )


__all__ = ["RoutingAgent"]
