"""Durable-run semantics in one process: what is recorded, what a resume runs, what it refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.core import FinalEvent
from routegate.errors import ConfigurationError
from routegate.plan import (
    CheckpointConflictError,
    CheckpointMismatchError,
    Plan,
    Step,
    Store,
    interrupt,
    step_key,
    when,
)


class Draft(BaseModel):
    text: str
    words: int


def status(store: Store, key: str) -> tuple[str, str]:
    record = store.checkpoints.load(key)
    assert record is not None
    return record.status, record.stop_reason


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s = Store() if request.param == "memory" else Store(db=tmp_path / "plans.sqlite")
    yield s
    s.close()


def reopen(store: Store) -> Store:
    """A fresh Store on the same database (the memory store is its own database)."""
    return store if store.db is None else Store(db=store.db)


def test_models_round_trip_as_models_through_the_checkpoint(store: Store) -> None:
    calls: list[str] = []

    def write(text: str) -> Draft:
        calls.append("write")
        return Draft(text=text, words=len(text.split()))

    def fail_once(d: Draft) -> str:
        calls.append("check")
        if calls.count("check") == 1:
            raise ValueError("flaky")
        assert isinstance(d, Draft)
        return d.text.upper()

    def build(s: Store) -> Plan:
        return Plan(Step(write, output=Draft, writes="draft"), Step(fail_once), store=s, checkpoint_key="k")

    first = build(store).run("two words")
    assert first.stop_reason == "step_error:ValueError"
    assert status(store, "k") == ("ended", "step_error:ValueError")  # never left running
    fresh = reopen(store)
    second = build(fresh).run()
    assert second.ok and second.output == "TWO WORDS"
    assert calls == ["write", "check", "check"]  # the finished step did not run again
    assert isinstance(fresh["draft"], Draft)
    assert second.path == ("write", "fail_once")


def test_a_finished_run_is_returned_without_running_anything(store: Store) -> None:
    calls: list[int] = []
    plan = Plan(Step(lambda x: calls.append(x) or x + 1, name="inc"), store=store, checkpoint_key="done")
    assert plan.run(1).output == 2
    again = plan.run(1)
    assert (again.output, again.path, calls) == (2, ("inc",), [1])
    assert status(store, "done") == ("ended", "success")
    assert Plan(plan.steps[0], store=store, checkpoint_key="done", resume=False).run(5).output == 6
    assert calls == [1, 5]


def test_max_iterations_is_recorded_as_ended_and_resume_continues(store: Store) -> None:
    def loop(n: int) -> int:
        return n + 1

    plan = Plan(
        Step(loop, routes={"loop": when.payload(lambda n: n < 5)}),
        max_iterations=3,
        store=store,
        checkpoint_key="loop",
    )
    first = plan.run(0)
    assert first.stop_reason == "max_iterations"
    assert status(store, "loop") == ("ended", "max_iterations")
    second = plan.run()
    assert second.ok and second.output == 5
    assert len(second.path) == 5  # three before the stop, two after: no step ran twice


def test_a_changed_plan_is_refused_with_a_clear_error(store: Store) -> None:
    def a(x: int) -> int:
        raise ValueError("stop here")

    def b(x: int) -> int:
        return x

    Plan(Step(a), Step(b), store=store, checkpoint_key="v1").run(1)
    with pytest.raises(CheckpointMismatchError, match="different plan"):
        Plan(Step(b), Step(a), store=store, checkpoint_key="v1").run(1)
    assert status(store, "v1") == ("ended", "step_error:ValueError")


def test_each_step_gets_a_stable_idempotency_key(store: Store) -> None:
    seen: list[str | None] = []

    def note(x: int) -> int:
        seen.append(step_key())
        return x + 1

    Plan(Step(note, name="n", routes={"n": when.payload(lambda v: v < 2)}), store=store, checkpoint_key="ik").run(0)
    assert seen == ["ik/1/n", "ik/2/n"]
    assert step_key() is None
    assert Plan(Step(note, name="plain")).run(0).ok and seen[-1] is None


def test_interrupt_asks_and_a_resume_hands_the_answer_to_the_step(store: Store) -> None:
    def approve(amount: int) -> str:
        answer = interrupt({"refund": amount})
        second = interrupt("really?")
        return f"{answer}/{second}"

    plan = Plan(Step(approve, routes={"approve": when.errored()}), store=store, checkpoint_key="hitl")
    first = plan.run(40)
    assert (first.stop_reason, first.phase, first.question) == ("interrupted", "step", {"refund": 40})
    assert status(store, "hitl") == ("interrupted", "interrupted")
    second = plan.run(answer="yes")
    assert (second.stop_reason, second.question) == ("interrupted", "really?")
    third = plan.run(answer="sure")
    assert third.ok and third.output == "yes/sure"
    assert third.path == ("approve",)  # errored() did not catch the interrupts


def test_a_plan_without_a_store_keeps_its_checkpoints_across_runs_even_when_its_steps_write() -> None:
    """The run's own store (a fresh one per run, for ``writes=``) is not where its checkpoints go: the plan keeps
    them, so the interrupted run resumes on the next call."""

    def approve(amount: int) -> str:
        return f"approved {amount}: {interrupt('ok?')}"

    plan = Plan(Step(lambda x: x * 2, name="double", writes="doubled"), Step(approve), checkpoint_key="no-store")
    first = plan.run(20)
    assert (first.stop_reason, first.question) == ("interrupted", "ok?")
    second = plan.run(answer="yes")
    assert second.ok and second.output == "approved 40: yes" and second.path == ("double", "approve")
    assert second.store is not None and second.store.read("doubled") == 40
    assert plan.run().output == "approved 40: yes"  # finished: answered from the plan's checkpoints


def test_answer_needs_an_interrupted_durable_run(store: Store) -> None:
    plan = Plan(Step(lambda x: x, name="id"), store=store, checkpoint_key="plain")
    with pytest.raises(ValueError, match="no interrupted run"):
        plan.run(1, answer="yes")
    plan.run(1)
    with pytest.raises(ValueError, match="not interrupted"):
        plan.run(answer="yes")
    with pytest.raises(ConfigurationError, match="checkpoint_key"):
        Plan(Step(lambda x: x, name="id")).run(1, answer="yes")


def test_an_interrupt_without_checkpointing_stops_the_run() -> None:
    result = Plan(Step(lambda x: interrupt("ok?"), name="ask")).run(1)
    assert (result.stop_reason, result.question, result.message) == ("interrupted", "ok?", "interrupted: ok?")


def test_a_second_live_run_on_the_key_is_refused_and_the_first_is_recorded_ended(store: Store) -> None:
    def again(x: int) -> int:
        plan.run(x)  # the same key, while this run holds it
        return x

    plan = Plan(Step(again), store=store, checkpoint_key="busy")
    with pytest.raises(CheckpointConflictError, match="on_concurrent='fork'"):
        plan.run(1)
    assert status(store, "busy") == ("ended", "plan_error:CheckpointConflictError")


def test_fork_runs_beside_the_live_run_under_its_own_key(store: Store) -> None:
    forks: list[Any] = []

    def again(x: int) -> int:
        if x == 1:
            forks.append(plan.run(2))
        return x

    plan = Plan(Step(again), store=store, checkpoint_key="f", on_concurrent="fork", resume=False)
    assert plan.run(1).checkpoint_key == "f"
    assert forks[0].ok and forks[0].checkpoint_key.startswith("f/fork-")
    assert status(store, forks[0].checkpoint_key) == ("ended", "success")


async def test_async_durable_runs_stream_their_events(store: Store) -> None:
    async def slow(x: int) -> int:
        return x * 2

    plan = Plan(Step(slow), Step(lambda x: x + 1, name="inc"), store=store, checkpoint_key="async")
    events = [event async for event in plan.iter(3)]
    assert isinstance(events[-1], FinalEvent) and events[-1].result.output == 7
    again = [event async for event in plan.iter(3)]
    assert [type(e) for e in again] == [FinalEvent]  # finished: nothing runs, only the result


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(min_size=1, max_size=60), payload=st.recursive(st.text() | st.integers(), st.lists, max_leaves=8))
def test_any_key_and_json_payload_round_trip(tmp_path: Path, key: str, payload: Any) -> None:
    store = Store(db=tmp_path / "prop.sqlite")
    store.checkpoints.delete(key)  # hypothesis reuses tmp_path: start each example clean
    try:
        plan = Plan(Step(lambda x: x, name="id"), Step(lambda x: x, name="id2"), store=store, checkpoint_key=key)
        first = plan.run(payload)
        again = plan.run(payload)
        assert again.output == first.output == payload
        record = store.checkpoints.load(key)
        assert record is not None and record.key == key
    finally:
        store.close()


def test_store_repr_hides_a_database_url() -> None:
    assert "secret" not in repr(Store(db="postgresql://u:secret@h/db"))
    with pytest.raises(ValueError, match="Store\\(\\)"):
        _ = Store(db=":memory:").checkpoints


def test_step_targets_get_the_idempotency_key_on_their_context(store: Store) -> None:
    from routegate.plan import StepContext

    class Charge:
        def run_step(self, payload: int, ctx: StepContext) -> str:
            return f"{ctx.idempotency_key}:{payload}"

    result = Plan(Step(Charge(), name="charge"), store=store, checkpoint_key="pay").run(3)
    assert result.output == "pay/1/charge:3"
    assert Plan(Step(Charge(), name="charge")).run(3).output == "None:3"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    field=st.sampled_from(
        [
            "at",
            "rejoin",
            "iterations",
            "envelopes",
            "decisions",
            "store",
            "prev",
            "band",
            "answers",
            "input",
            "allowance",
        ]
    ),
    value=_JSON,
)
def test_an_edited_checkpoint_resumes_or_is_refused_clearly(tmp_path: Path, field: str, value: Any) -> None:
    """Whoever can write the checkpoint database controls its JSON: any edit either resumes within the plan's
    own steps or is refused with CheckpointMismatchError — never another exception, never foreign code."""
    from routegate.plan.checkpoint import RUNNING

    store = Store(db=tmp_path / "tamper.sqlite")
    try:

        def fail(d: Draft) -> Draft:
            raise ValueError("stop")

        plan = Plan(
            Step(lambda t: Draft(text=t, words=1), name="write", output=Draft, writes="draft"),
            Step(fail, output=Draft),
            store=store,
            checkpoint_key="t",
        )
        plan.run("x")
        record = store.checkpoints.load("t")
        assert record is not None
        state = dict(record.state)
        state[field] = value
        store.checkpoints.save("t", RUNNING, "", state)
        refusal, path = "", ()
        try:
            path = plan.run().path
        except CheckpointMismatchError as exc:
            refusal = str(exc)
        assert "damaged or was edited" in refusal or "different plan" in refusal or path
        assert set(path) <= {"write", "fail"}
    finally:
        store.checkpoints.delete("t")
        store.close()


async def test_a_step_cut_off_by_the_deadline_is_recorded_and_retried(store: Store) -> None:
    import asyncio

    from routegate.core import Budget

    calls: list[str] = []

    async def first(x: int) -> int:
        calls.append("first")
        return x + 1

    async def wait(x: int) -> int:
        calls.append("wait")
        if calls.count("wait") == 1:
            await asyncio.Event().wait()  # never set: only the deadline ends it
        return x * 10

    plan = Plan(Step(first), Step(wait), budget=Budget(max_seconds=0.05), store=store, checkpoint_key="slow")
    cut = await plan.arun(1)
    assert cut.stop_reason == "max_seconds"
    assert status(store, "slow") == ("ended", "max_seconds")
    done = await plan.arun()
    assert done.ok and done.output == 20
    assert calls == ["first", "wait", "wait"]
