"""Parallel bands: consecutive parallel=True steps run concurrently on the same input, their writes apply
atomically, and the step after the band receives every branch's payload."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from routegate.plan import Plan, PlanRuntimeError, Step, Store, from_start, from_step, when


async def test_band_members_run_concurrently() -> None:
    left_started, right_started = asyncio.Event(), asyncio.Event()

    async def left(x: str) -> str:
        left_started.set()
        await right_started.wait()  # deadlocks unless the siblings run at the same time
        return f"left({x})"

    async def right(x: str) -> str:
        right_started.set()
        await left_started.wait()
        return f"right({x})"

    plan = Plan(
        Step(lambda x: x.upper(), name="prep"),
        Step(left, parallel=True),
        Step(right, parallel=True),
        Step(lambda joined: joined, name="merge"),
    )
    async with asyncio.timeout(10):  # a guard against a deadlock regression, not a synchronisation
        result = await plan.arun("q")
    assert result.path == ("prep", "left", "right", "merge")
    assert result.output == {"left": "left(Q)", "right": "right(Q)"}
    assert [entry.why for entry in result.trace[1:3]] == ["parallel band", "parallel band"]


def test_sync_bands_run_in_declared_order_and_feed_from_step() -> None:
    plan = Plan(
        Step(lambda x: x, name="start"),
        Step(lambda x: f"a({x})", name="a", parallel=True, writes="a"),
        Step(lambda x: f"b({x})", name="b", parallel=True, context=from_start, writes="b"),
        Step(lambda x: x, name="after", context=from_step("b")),
    )
    result = plan.run("in")
    assert result.path == ("start", "a", "b", "after")
    assert result.output == "b(in)"
    assert result.store is not None and result.store.to_dict() == {"a": "a(in)", "b": "b(in)"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_member_stops_the_run_and_no_member_writes(mode: str) -> None:
    async def ok_async(x: Any) -> str:
        return "ok"

    def ok_sync(x: Any) -> str:
        return "ok"

    def bad(x: Any) -> str:
        raise ValueError("branch failed")

    ok = ok_async if mode == "async" else ok_sync
    store = Store()
    plan = Plan(
        Step(ok, name="first", parallel=True, writes="first"),
        Step(bad, name="second", parallel=True, writes="second"),
        Step(ok, name="third", parallel=True, writes="third"),
        Step(ok, name="after"),
        store=store,
    )
    result = plan.run(None)
    assert result.stop_reason == "step_error:ValueError"
    assert result.path == ("first", "second", "third")
    assert [entry.ok for entry in result.trace] == [True, False, True]
    assert result.trace[1].why == "error"
    assert store.to_dict() == {}  # atomic: nothing from the succeeded siblings either


async def test_a_plan_runtime_error_in_a_member_propagates() -> None:
    async def fine(x: Any) -> str:
        return "fine"

    def broken(env: Any) -> bool:
        raise KeyError("oops")

    buggy = Plan(Step(lambda x: x, name="spin", routes={"spin": broken}), name="buggy")
    plan = Plan(Step(fine, parallel=True), Step(buggy, parallel=True))
    with pytest.raises(PlanRuntimeError, match="routes predicate for target 'spin' raised KeyError"):
        await plan.arun(None)


async def test_a_member_that_loops_stops_the_band_with_max_iterations() -> None:
    async def fine(x: Any) -> str:
        return "fine"

    looping = Plan(
        Step(lambda x: x, name="spin", routes={"spin": when.payload(lambda _: True)}), name="looping", max_iterations=2
    )
    result = await Plan(Step(fine, parallel=True), Step(looping, parallel=True)).arun(None)
    assert (result.stop_reason, result.phase) == ("max_iterations", "step")
    assert result.path == ("fine", "looping") and "max_iterations=2" in result.message


def test_a_band_counts_as_one_iteration_and_can_end_the_plan() -> None:
    plan = Plan(
        Step(lambda x: 1, name="a", parallel=True), Step(lambda x: 2, name="b", parallel=True), max_iterations=1
    )
    result = plan.run(None)
    assert result.output == {"a": 1, "b": 2}


def test_loops_can_run_a_band_again() -> None:
    counter = {"n": 0}

    def count(_: Any) -> int:
        counter["n"] += 1
        return counter["n"]

    plan = Plan(
        Step(lambda x: x, name="start"),
        Step(count, name="a", parallel=True),
        Step(lambda x: "b", name="b", parallel=True),
        Step(lambda joined: joined["a"], name="check", routes={"start": when.payload(lambda n: n < 2)}),
    )
    assert plan.run(None).path == ("start", "a", "b", "check") * 2


async def test_every_kind_of_target_can_be_a_band_member() -> None:
    from pydantic import BaseModel

    from routegate.plan import StepContext

    class Count(BaseModel):
        n: int

    class Target:
        async def run_step(self, payload: Any, ctx: StepContext) -> str:
            return f"{ctx.step}:{payload}"

    async def fetch(x: Any) -> dict[str, int]:
        return {"n": 2}

    inner = Plan(Step(lambda x: f"inner({x})", name="i"), name="nested")
    plan = Plan(
        Step(Target(), name="target", parallel=True),
        Step(inner, parallel=True),
        Step(fetch, parallel=True, output=Count),
        Step(lambda joined: joined, name="after"),
    )
    result = await plan.arun("x")
    assert result.output == {"target": "target:x", "nested": "inner(x)", "fetch": Count(n=2)}


@pytest.mark.parametrize("failure", ["coroutine", "nested"])
async def test_band_member_failures_of_every_kind(failure: str) -> None:
    async def later(x: Any) -> Any:
        return x

    async def fine(x: Any) -> str:
        return "fine"

    def bad(_: Any) -> Any:
        raise KeyError("missing")

    member = (
        Step(lambda x: later(x), name="member", parallel=True)
        if failure == "coroutine"
        else Step(Plan(Step(bad), name="member"), parallel=True)
    )
    result = await Plan(Step(fine, parallel=True), member).arun(None)
    assert result.stop_reason == ("step_error:TypeError" if failure == "coroutine" else "step_error:KeyError")
