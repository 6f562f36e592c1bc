"""The governance kernel: Outcome, RunContext, the governed step, one deadline, one event stream."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from core._scripted import ListRouter, route
from routegate.core import (
    Budget,
    FinalizeRequest,
    Outcome,
    RouteDecision,
    RouteGateway,
    RoutePolicy,
    RouteRequest,
    RunContext,
    TicketArgs,
    Worker,
    stop_reasons,
    worker,
)
from routegate.core._deadline import Deadline
from routegate.core._stream import stream_events
from routegate.core.contracts import DelegationLedger
from routegate.core.events import DecisionEvent, DelegationEvent, FinalEvent, ObservationEvent
from routegate.core.governed import Delegated, GovernedStep, Stopped
from routegate.errors import RoutegateError, RunStopError, RuntimeFaultError
from routegate.plan import RoutingAgent


@dataclass
class Deps:
    tenant: str


# -- Outcome -----------------------------------------------------------------------------------------------------
def test_outcome_success_and_stop() -> None:
    assert Outcome.success() == Outcome(True, "success")
    assert Outcome.stopped("success", "route") is Outcome.success()
    stopped = Outcome.stopped("loop_detected", "delegate", "called twice")
    assert (stopped.ok, stopped.stop_reason, stopped.phase, stopped.message) == (
        False,
        "loop_detected",
        "delegate",
        "called twice",
    )
    assert stopped.to_dict() == {
        "ok": False,
        "stop_reason": "loop_detected",
        "phase": "delegate",
        "message": "called twice",
    }
    assert Outcome.success().to_dict() == {"ok": True, "stop_reason": "success"}


async def test_run_results_carry_their_outcome() -> None:
    echo = _echo()
    ok = await RoutingAgent(workers=[echo], router=ListRouter([route("echo")])).arun("hi")
    assert ok.outcome == Outcome.success()
    refused = await RoutingAgent(workers=[echo], router=ListRouter([route("nope")])).arun("hi")
    assert refused.outcome.ok is False
    assert refused.outcome.stop_reason == "invalid_route:route_not_allowed:nope"
    assert refused.outcome.phase == "route"
    assert refused.outcome.message == refused.message


# -- RunContext --------------------------------------------------------------------------------------------------
def _echo() -> Worker:
    @worker(args=TicketArgs, inline=True)
    def echo(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"ticket": ticket}}

    return echo


def test_a_run_context_parameter_is_not_part_of_the_schema() -> None:
    @worker
    def lookup(ticket: str, ctx: RunContext[Deps]) -> dict[str, Any]:
        return {"status": "done"}

    assert set(lookup.schema.model_json_schema()["properties"]) == {"ticket"}
    assert lookup.args_mismatch({"ticket": "x"}) is None
    assert lookup.context_param == "ctx"


async def test_worker_router_and_finalizer_that_ask_get_the_runs_context() -> None:
    seen: dict[str, RunContext[Deps]] = {}

    @worker(args=TicketArgs)
    async def lookup(ticket: str, run: RunContext[Deps]) -> dict[str, Any]:
        seen["worker"] = run
        return {"status": "done", "result": {"tenant": run.deps.tenant}}

    class Router:
        async def decide(self, request: RouteRequest, ctx: RunContext[Deps]) -> RouteDecision:
            seen["router"] = ctx
            return RouteDecision(raw=route("lookup"))

    class Finalizer:
        async def finalize(self, request: FinalizeRequest, ctx: RunContext[Deps]) -> str:
            seen["finalizer"] = ctx
            return f"tenant {request.observation['result']['tenant']}"

    agent = RoutingAgent(workers=[lookup], router=Router(), finalizer=Finalizer(), budget=Budget(max_seconds=5))
    result = await agent.arun("hi", deps=Deps("acme"))
    assert result.ok, result.to_dict()
    assert result.output == "tenant acme"
    contexts = set(map(id, seen.values()))
    assert len(contexts) == 1 and set(seen) == {"worker", "router", "finalizer"}
    ctx = seen["worker"]
    assert ctx.run_id == result.run_id
    assert ctx.deps == Deps("acme")
    assert ctx.ledger.delegations == 1
    assert 0 < ctx.remaining() <= 5


async def test_a_route_cannot_set_the_context_parameter() -> None:
    calls: list[object] = []

    @worker
    def lookup(ticket: str, ctx: RunContext[Deps]) -> dict[str, Any]:
        calls.append(ctx)
        return {"status": "done"}

    forged = {"kind": "route", "target": "lookup", "args": {"ticket": "t", "ctx": {"deps": "evil"}}}
    result = await RoutingAgent(workers=[lookup], router=ListRouter([forged])).arun("hi", deps=Deps("acme"))
    assert result.stop_reason == "invalid_route:bad_args"
    assert calls == []


def test_context_start_takes_the_budget() -> None:
    ctx = RunContext.start("deps", Budget(max_delegations=2, max_seconds=3))
    assert ctx.ledger.max_delegations == 2
    assert 0 < ctx.remaining() <= 3
    assert len(ctx.run_id) == 16
    assert RunContext(None).remaining() == math.inf
    ctx.send("nobody listens")  # no emitter: a no-op


# -- the governed step -------------------------------------------------------------------------------------------
def _step(*workers: Worker, check: Callable[[object], tuple[str, str] | None] | None = None) -> GovernedStep:
    names = [w.name for w in workers]
    return GovernedStep(
        RoutePolicy(names, {w.name: w.schema for w in workers}),
        RouteGateway(allow=names, registry=workers),
        check=check,
    )


async def test_the_governed_step_validates_delegates_checks_and_traces_once() -> None:
    events: list[object] = []
    ctx = RunContext.start(None, Budget(), emit=events.append)
    done = await _step(_echo()).run(RouteDecision(raw=route("echo", "  a   b "), decided_by="rules"), ctx, attempt=2)
    assert isinstance(done, Delegated)
    assert done.intent.args == {"ticket": "a b"}
    assert done.status == "done" and done.observation == {"status": "done", "result": {"ticket": "a b"}}
    assert done.trace.ok and done.trace.attempt == 2 and done.trace.decided_by == "rules"
    assert done.trace.phase == "delegate" and done.trace.observation_status == "done"
    assert [type(e) for e in events] == [DecisionEvent, DelegationEvent, ObservationEvent]
    assert done.history is not None and done.history.route == done.intent


async def test_the_governed_step_stops_on_a_refused_decision_without_running_anything() -> None:
    ran: list[str] = []

    @worker(args=TicketArgs, inline=True)
    def echo(ticket: str) -> dict[str, Any]:
        ran.append(ticket)
        return {"status": "done"}

    stopped = await _step(echo).run(RouteDecision(raw="not json"), RunContext.start(None, Budget()))
    assert isinstance(stopped, Stopped)
    assert stopped.outcome == Outcome(False, "invalid_route:non_json", "route", "route decision is not valid JSON")
    assert stopped.raw == "not json"
    assert stopped.trace.phase == "route" and stopped.trace.stop_reason == "invalid_route:non_json"
    assert ran == []


async def test_the_governed_step_reports_a_bad_observation_with_what_came_back() -> None:
    @worker(args=TicketArgs, inline=True)
    def odd(ticket: str) -> object:
        return {"status": "maybe"}

    stopped = await _step(odd).run(RouteDecision(raw=route("odd")), RunContext.start(None, Budget()))
    assert isinstance(stopped, Stopped)
    assert stopped.stop_reason == stop_reasons.ROUTE_BAD_OBSERVATION
    assert stopped.outcome.phase == "delegate"
    assert stopped.value == {"status": "maybe"} and stopped.status == "maybe"
    assert stopped.trace.ok is False and stopped.trace.stop_reason == stop_reasons.ROUTE_BAD_OBSERVATION


async def test_a_custom_observation_check_decides_what_passes() -> None:
    @worker(args=TicketArgs, inline=True)
    def plain(ticket: str) -> object:
        return 42

    def numbers_only(value: object) -> tuple[str, str] | None:
        return None if isinstance(value, int) else ("bad", "not a number")

    done = await _step(plain, check=numbers_only).run(
        RouteDecision(raw=route("plain")), RunContext.start(None, Budget())
    )
    assert isinstance(done, Delegated) and done.value == 42 and done.observation is None


async def test_a_worker_stop_keeps_its_phase_and_the_ledger_is_the_contexts() -> None:
    @worker(args=TicketArgs, inline=True)
    def quits(ticket: str) -> object:
        raise RunStopError("llm_timeout", "the model did not answer", phase="finalize")

    ctx = RunContext.start(None, Budget(max_delegations=1))
    stopped = await _step(quits).run(RouteDecision(raw=route("quits")), ctx)
    assert isinstance(stopped, Stopped)
    assert stopped.outcome == Outcome(False, "llm_timeout", "finalize", "the model did not answer")
    assert ctx.ledger.delegations == 1
    again = await _step(quits).run(RouteDecision(raw=route("quits", "other")), ctx)
    assert isinstance(again, Stopped) and again.stop_reason == "max_delegations"


async def test_the_gateway_alone_passes_the_context_too() -> None:
    @worker(args=TicketArgs)
    async def who(ticket: str, ctx: RunContext[str]) -> dict[str, Any]:
        return {"status": "done", "result": ctx.deps}

    from routegate.core.contracts import RouteIntent

    gateway = RouteGateway(allow=["who"], registry=[who])
    ctx = RunContext("acme", ledger=DelegationLedger(1))
    called = await gateway.delegate(RouteIntent("who", {"ticket": "t"}), ctx.ledger, ctx=ctx)
    assert getattr(called, "value", None) == {"status": "done", "result": "acme"}


# -- one deadline, one stream ------------------------------------------------------------------------------------
async def test_the_deadline_of_a_context_cuts_the_block() -> None:
    ctx = RunContext.start(None, Budget(max_seconds=0.05))
    never = asyncio.Event()
    deadline = Deadline.of(ctx)
    with pytest.raises(TimeoutError):
        async with deadline:
            await never.wait()
    assert deadline.expired


async def test_deadlines_on_one_loop_each_cut_their_own_block() -> None:
    # the deadlines of one loop share one timer: one armed after a later one, and one armed after an earlier one,
    # are each cut when their own time passes, and a long one keeps running meanwhile
    never = asyncio.Event()

    async def blocked(seconds: float) -> Deadline:
        deadline = Deadline(seconds)
        with pytest.raises(TimeoutError):
            async with deadline:
                await never.wait()
        return deadline

    long = asyncio.ensure_future(blocked(30))
    await asyncio.sleep(0)
    short, later = await asyncio.wait_for(asyncio.gather(blocked(0.02), blocked(0.06)), 10)
    assert short.expired and later.expired
    assert not long.done()
    long.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long


async def test_a_finished_block_is_not_cut_when_its_deadline_passes_later() -> None:
    async with Deadline(0.01) as deadline:
        pass
    await asyncio.sleep(0.05)  # the task goes on past the deadline of the block it left: nothing cancels it
    assert not deadline.expired


async def test_an_unbounded_deadline_sets_no_timer() -> None:
    async with Deadline(math.inf) as deadline:
        await asyncio.sleep(0)
    assert not deadline.expired


async def test_iter_yields_the_runs_events_in_order_and_ends_with_the_result() -> None:
    agent = RoutingAgent(workers=[_echo()], router=ListRouter([route("echo")]))
    events = [event async for event in agent.iter("hi")]
    assert [type(e) for e in events] == [DecisionEvent, DelegationEvent, ObservationEvent, FinalEvent]
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.result.ok


async def test_closing_iter_early_cancels_the_run() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @worker(args=TicketArgs)
    async def slow(ticket: str) -> dict[str, Any]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"status": "done"}  # pragma: no cover - never reached

    stream = RoutingAgent(workers=[slow], router=ListRouter([route("slow")])).iter("hi")
    async for event in stream:
        if isinstance(event, DelegationEvent):
            break
    await asyncio.wait_for(started.wait(), 5)  # the run goes on in its task while nobody reads
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator
    assert cancelled.is_set()


async def test_a_stream_whose_run_returns_without_its_last_event_ends() -> None:
    async def run(emit: Callable[[str], None]) -> None:
        emit("one")

    assert [e async for e in stream_events(run, lambda e: e == "last")] == ["one"]


async def test_a_stream_surfaces_the_runs_exception() -> None:
    async def run(emit: Callable[[str], None]) -> None:
        emit("one")
        raise ValueError("boom")

    seen: list[str] = []

    async def consume() -> None:
        async for event in stream_events(run, lambda e: False):
            seen.append(event)

    with pytest.raises(ValueError, match="boom"):
        await consume()
    assert seen == ["one"]


# -- the exception tree ------------------------------------------------------------------------------------------
def test_the_stop_signal_is_outside_the_fault_branch() -> None:
    assert issubclass(RunStopError, RoutegateError)
    assert not issubclass(RunStopError, RuntimeFaultError)


# -- the sync bridge ---------------------------------------------------------------------------------------------
def test_run_sync_runs_what_suspends_and_what_does_not() -> None:
    from routegate.core._sync import run_sync

    async def instant() -> int:
        return 1

    async def suspends() -> int:
        await asyncio.sleep(0)
        await asyncio.to_thread(lambda: None)
        return 2

    async def loop_state() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        return loop.is_running(), asyncio.current_task() is not None

    assert run_sync(instant()) == 1
    assert run_sync(suspends()) == 2
    assert run_sync(loop_state()) == (True, True)


def test_ctrl_c_inside_run_sync_cancels_the_run_before_it_propagates() -> None:
    from routegate.core._sync import run_sync

    unwound: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt

    async def waits_forever() -> None:
        asyncio.get_running_loop().call_soon(interrupt)
        try:
            await asyncio.Event().wait()
        finally:
            unwound.append("finally ran")

    with pytest.raises(KeyboardInterrupt):
        run_sync(waits_forever())
    assert unwound == ["finally ran"]
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # the thread is left with no running loop


def test_run_sync_refuses_inside_a_running_loop() -> None:
    from routegate.core._sync import run_sync
    from routegate.errors import ConfigurationError

    async def outer() -> None:
        async def inner() -> None:
            return None

        with pytest.raises(ConfigurationError, match="running event loop"):
            run_sync(inner(), what="run")

    asyncio.run(outer())


def test_an_optional_context_parameter_is_a_context_parameter() -> None:
    @worker
    def maybe(ticket: str, ctx: RunContext[Deps] | None = None) -> dict[str, Any]:
        return {"status": "done"}

    assert maybe.context_param == "ctx"
    assert set(maybe.schema.model_json_schema()["properties"]) == {"ticket"}
