"""Edge cases of the core contracts: construction errors, odd observations and answers, the JSON view."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from typing import Any

import pytest
from pydantic import BaseModel

from core._scripted import ListRouter, route
from routegate.core import (
    FinalAnswer,
    FinalizeRequest,
    RouteGateway,
    RoutePolicy,
    TicketArgs,
    Worker,
    worker,
)
from routegate.core._deadline import Deadline
from routegate.core.compose import compose_answer
from routegate.core.contracts import ABSENT, jsonable
from routegate.core.policy import RouteRejection
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import RoutingAgent


def agent_for(*workers: Worker, outputs: list[object], **kwargs: Any) -> RoutingAgent:
    return RoutingAgent(workers=workers, router=ListRouter(outputs), **kwargs)


# -- workers ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", "  ", " padded", 7])
def test_bad_worker_names_are_refused(name: object) -> None:
    with pytest.raises(ConfigurationError, match="worker name"):
        Worker(name=name, fn=lambda ticket: {})  # type: ignore[arg-type]


def test_a_worker_needs_a_callable_and_a_pydantic_schema() -> None:
    with pytest.raises(ConfigurationError, match="callable"):
        Worker(name="w", fn="not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="pydantic model"):
        Worker(name="w", fn=lambda ticket: {}, args_model=dict)  # type: ignore[arg-type]


def test_positional_only_parameters_cannot_be_routed() -> None:
    def positional(ticket: str, /) -> dict[str, Any]:
        return {}

    with pytest.raises(ConfigurationError, match="positional-only"):
        worker(positional)


def test_a_kwargs_worker_accepts_any_extra_argument_its_schema_allows() -> None:
    class Open(BaseModel):
        model_config = {"extra": "allow"}
        ticket: str

    seen: dict[str, Any] = {}

    @worker(args=Open, inline=True)
    def flexible(ticket: str, **rest: Any) -> dict[str, Any]:
        seen.update(rest)
        return {"status": "done", "result": {"ticket": ticket}}

    raw = {"kind": "route", "target": "flexible", "args": {"ticket": "t", "priority": "high"}}
    assert agent_for(flexible, outputs=[raw]).run("t").ok
    assert seen == {"priority": "high"}


def test_duplicate_worker_names_and_non_workers_are_refused_by_the_gateway() -> None:
    a = worker(lambda ticket: {}, name="same", args=TicketArgs)
    b = worker(lambda ticket: {}, name="same", args=TicketArgs)
    with pytest.raises(ConfigurationError, match="two workers"):
        RouteGateway(allow={"same"}, registry=[a, b])
    with pytest.raises(ConfigurationError, match="Worker objects"):
        RouteGateway(allow=set(), registry={"x": print})  # type: ignore[dict-item]
    gateway = RouteGateway(allow={"same"}, registry={"same": a})
    assert gateway.allow == {"same"}
    assert set(gateway.workers) == {"same"}
    assert RoutePolicy({"same"}).allowed == {"same"}


# -- observations and answers ----------------------------------------------------------------------------------
def test_observations_may_be_pydantic_models_or_dataclasses() -> None:
    class Done(BaseModel):
        status: str = "done"
        result: dict[str, int] = {"n": 1}

    @dataclasses.dataclass
    class DoneToo:
        status: str = "done"
        result: dict[str, int] = dataclasses.field(default_factory=lambda: {"n": 2})

    @worker(args=TicketArgs, inline=True)
    def model_worker(ticket: str) -> Done:
        return Done()

    @worker(args=TicketArgs, inline=True)
    def dataclass_worker(ticket: str) -> DoneToo:
        return DoneToo()

    for w, n in ((model_worker, 1), (dataclass_worker, 2)):
        result = agent_for(w, outputs=[route(w.name)]).run("t")
        assert result.ok
        assert result.history[0].observation["result"] == {"n": n}


def test_a_worker_stop_signal_ends_the_run_with_its_reason_in_phase_delegate() -> None:
    @worker(args=TicketArgs)
    async def upstream(ticket: str) -> dict[str, Any]:
        raise RunStopError("tool_unavailable:crm", "the CRM is down")

    result = agent_for(upstream, outputs=[route("upstream")]).run("t")
    assert result.stop_reason == "tool_unavailable:crm"
    assert result.phase == "delegate"
    assert result.trace[-1].stop_reason == "tool_unavailable:crm"


def test_a_stop_signal_may_name_its_own_phase() -> None:
    class Router:
        async def decide(self, request: object) -> object:
            raise RunStopError("clarify:a,b", phase="bogus")

    result = RoutingAgent(workers=[], router=Router()).run("t")  # type: ignore[arg-type]
    assert result.stop_reason == "clarify:a,b"
    assert result.phase == "route"  # an unknown phase falls back to where the run was


def test_a_finalizer_bug_is_a_stop() -> None:
    class Broken:
        async def finalize(self, request: FinalizeRequest) -> str:
            raise ZeroDivisionError

    @worker(args=TicketArgs, inline=True)
    def ok(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"x": 1}}

    result = agent_for(ok, outputs=[route("ok")], finalizer=Broken()).run("t")
    assert result.stop_reason == "finalize_error:ZeroDivisionError"
    assert result.phase == "finalize"


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        (
            {"status": "done", "error": "user_not_found"},
            "The billing specialist could not complete the request: user_not_found.",
        ),
        ({"status": "done", "result": "refund issued"}, "The billing specialist handled your request: refund issued."),
        ({"status": "done"}, "The billing specialist handled your request: no details were returned."),
        (
            {"status": "done", "result": {"items": ["a", "b"], "none": [], "nested": {"k": 1.5}, "flag": False}},
            "The billing specialist handled your request. items: a; b; none: none; nested: k: 1.5; flag: no.",
        ),
    ],
)
def test_the_grounded_composer_only_uses_the_observation(observation: dict[str, Any], expected: str) -> None:
    assert compose_answer("billing_specialist", observation) == expected


# -- the JSON view ---------------------------------------------------------------------------------------------
def test_jsonable_makes_anything_json_safe() -> None:
    class Model(BaseModel):
        x: int = 1

    class WithDict:
        def to_dict(self) -> dict[str, Any]:
            return {"y": 2}

    value = {"nan": math.nan, "set": {1}, "model": Model(), "obj": WithDict(), 3: object()}
    safe = jsonable(value)
    json.dumps(safe)
    assert safe["nan"] == "nan"
    assert safe["model"] == {"x": 1}
    assert safe["obj"] == {"y": 2}
    assert safe["3"].startswith("<object")
    assert repr(ABSENT) == "ABSENT"
    assert not ABSENT


def test_a_non_string_goal_is_an_empty_goal_stop() -> None:
    result = agent_for(outputs=[]).run(42)  # type: ignore[arg-type]
    assert result.stop_reason == "invalid_goal:empty"


def test_result_extra_fields_are_merged_into_the_json_view() -> None:
    class Finalizer:
        async def finalize(self, request: FinalizeRequest) -> FinalAnswer:
            return FinalAnswer("done.", {"dispatch": [{"kind": "prose"}]})

    @worker(args=TicketArgs, inline=True)
    def ok(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"x": 1}}

    data = agent_for(ok, outputs=[route("ok")], finalizer=Finalizer()).run("t").to_dict()
    assert data["dispatch"] == [{"kind": "prose"}]
    assert (data["status"], data["answer"]) == ("ok", "done.")


def test_overlong_raw_text_is_refused_without_parsing() -> None:
    verdict = RoutePolicy({"a"}).validate("x" * 70_000)
    assert isinstance(verdict, RouteRejection)
    assert verdict.stop_reason == "invalid_route:non_json"
    assert "limit" in verdict.message


# -- the deadline ------------------------------------------------------------------------------------------------
async def test_a_deadline_passes_through_cancellations_that_are_not_its_own() -> None:
    async def guarded() -> None:
        async with Deadline(30):
            await asyncio.Event().wait()

    task = asyncio.ensure_future(guarded())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_deadline_needs_a_task() -> None:
    async def enter() -> None:
        async with Deadline(1):
            pass

    coro = enter()
    with pytest.raises(RuntimeError):  # no running loop, so no task to cancel at the deadline
        coro.send(None)
    coro.close()


class Escape(BaseException):
    """Not an Exception: nothing in the run may swallow it."""


async def test_iter_re_raises_what_escapes_the_run() -> None:
    class Router:
        async def decide(self, request: object) -> object:
            raise Escape

    stream = RoutingAgent(workers=[], router=Router()).iter("t")  # type: ignore[arg-type]
    with pytest.raises(Escape):
        async for _ in stream:
            pass


async def test_the_gateway_computes_the_hash_when_not_given() -> None:
    from routegate.core.contracts import DelegationLedger, RouteIntent
    from routegate.core.gateway import WorkerCalled
    from routegate.core.hashing import args_hash

    @worker(args=TicketArgs, inline=True)
    def echo(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": ticket}

    gateway = RouteGateway(allow={"echo"}, registry=[echo])
    outcome = await gateway.delegate(RouteIntent("echo", {"ticket": "t"}), DelegationLedger(max_delegations=1))
    assert isinstance(outcome, WorkerCalled)
    assert outcome.args_hash == args_hash({"ticket": "t"})
    assert outcome.value == {"status": "done", "result": "t"}


def test_sync_loops_are_closed_at_exit() -> None:
    import threading

    from routegate.core import _sync

    done: list[bool] = []

    async def nothing() -> bool:
        return True

    thread = threading.Thread(target=lambda: done.append(_sync.run_sync(nothing())))
    thread.start()
    thread.join()
    assert done == [True]
    loops = list(_sync._loops)
    _sync._close_loops()
    assert loops and all(loop.is_closed() for loop in loops)
    assert _sync._loops == []


@pytest.mark.parametrize(
    ("answer", "stop"), [(FinalAnswer("done.", {"k": 1}), "success"), (FinalAnswer(" "), "llm_empty")]
)
def test_a_final_answer_carries_extra_data_onto_the_result(answer: FinalAnswer, stop: str) -> None:
    class Finalizer:
        async def finalize(self, request: FinalizeRequest) -> FinalAnswer:
            return answer

    @worker(args=TicketArgs, inline=True)
    def ok(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"x": 1}}

    result = agent_for(ok, outputs=[route("ok")], finalizer=Finalizer()).run("t")
    assert result.stop_reason == stop
    if result.ok:
        assert result.output == "done."
        assert result.extra == {"k": 1}
        assert result.to_dict()["k"] == 1
