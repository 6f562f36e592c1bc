"""Run semantics: input flow, routing decisions, exclusive branches, loops, errors, sentinels, the store,
validation into output=, every kind of target, and the trace."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from routegate.core import RouteDecision, RouteRequest, RunResult, TicketArgs, TraceEntry, worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import (
    DetourTrapWarning,
    Envelope,
    ErrorInfo,
    MaxIterationsExceeded,
    Plan,
    PlanRuntimeError,
    RoutingAgent,
    Step,
    StepContext,
    Store,
    from_start,
    from_step,
    when,
)


def const(name: str, value: Any) -> Step:
    return Step(lambda _: value, name=name)


def echo(name: str, **kwargs: Any) -> Step:
    return Step(lambda payload: f"{name}({payload})", name=name, **kwargs)


def boom(_: Any) -> Any:
    raise ValueError("boom")


# -- input flow and linear progression ----------------------------------------------------------------------------
def test_linear_plan_chains_payloads_and_the_first_step_gets_the_input() -> None:
    result = Plan(echo("a"), echo("b"), echo("c")).run("in")
    assert result.ok and result.stop_reason == "success"
    assert result.path == ("a", "b", "c")
    assert result.output == "c(b(a(in)))"
    assert [env.payload for env in result.envelopes] == ["a(in)", "a(in)".join(["b(", ")"]), "c(b(a(in)))"]
    assert all(env.elapsed_ms >= 0 for env in result.envelopes)
    assert result.envelope("b").payload == "b(a(in))"
    with pytest.raises(KeyError, match="did not run"):
        result.envelope("zzz")


def test_first_true_predicate_wins_and_no_match_is_linear() -> None:
    def plan_for(n: int) -> Plan:
        return Plan(
            Step(
                lambda x: {"n": x},
                name="start",
                routes={
                    "big": when.field("n").greater_than(10),
                    "positive": when.field("n").greater_than(0),
                },
                after_branches="end",
            ),
            echo("positive"),
            echo("big"),
            echo("end"),
        )

    assert plan_for(50).run(50).path == ("start", "big", "end")  # both match: "big" is declared first
    assert plan_for(5).run(5).path == ("start", "positive", "end")
    linear = plan_for(-1).run(-1)
    assert linear.path == ("start", "positive", "big", "end")  # no match: linear
    assert linear.trace[0].why == "no route matched; linear"


def test_routing_is_a_detour_by_default() -> None:
    with pytest.warns(DetourTrapWarning):
        plan = Plan(
            Step(lambda x: x, name="a", routes={"c": when.payload(lambda p: p == "go")}),
            echo("b"),
            echo("c"),
            echo("d"),
        )
    assert plan.run("go").path == ("a", "c", "d")  # runs c, then resumes linearly from c's position
    assert plan.run("stay").path == ("a", "b", "c", "d")


def test_after_branches_makes_the_branch_exclusive() -> None:
    plan = Plan(
        Step(
            lambda x: x,
            name="route",
            routes={"x": when.payload(lambda p: p == "x"), "y": when.payload(lambda p: p == "y")},
            after_branches="join",
        ),
        echo("x"),
        echo("y"),
        echo("join"),
        echo("after"),
    )
    assert plan.run("x").path == ("route", "x", "join", "after")
    assert plan.run("y").path == ("route", "y", "join", "after")
    assert plan.run("z").path == ("route", "x", "y", "join", "after")


def test_routing_straight_to_its_own_rejoin_point_runs_it_once() -> None:
    plan = Plan(
        Step(
            lambda x: x,
            name="route",
            routes={"skip": when.payload(lambda p: p == "x"), "join": when.payload(bool)},
            after_branches="join",
        ),
        echo("skip"),
        echo("join"),
        echo("tail"),
    )
    result = plan.run("go")
    assert result.path == ("route", "join", "tail")
    assert result.trace[1].why == "linear"


def test_a_branch_that_routes_itself_overrides_the_rejoin() -> None:
    plan = Plan(
        Step(lambda x: x, name="route", routes={"a": when.payload(bool)}, after_branches="join"),
        Step(lambda x: x, name="a", routes={"fix": when.payload(lambda p: p == "bad")}, after_branches="join"),
        echo("fix"),
        echo("join"),
    )
    assert plan.run("bad").path == ("route", "a", "fix", "join")
    assert plan.run("ok").path == ("route", "a", "join")


def test_backward_routes_loop_until_the_predicate_stops_firing() -> None:
    counter = {"n": 0}

    def tick(_: Any) -> int:
        counter["n"] += 1
        return counter["n"]

    plan = Plan(
        Step(tick, name="tick"), Step(lambda n: n, name="check", routes={"tick": when.payload(lambda n: n < 3)})
    )
    result = plan.run(None)
    assert result.path == ("tick", "check") * 3
    assert result.output == 3


def test_max_iterations_counts_steps_and_names_limit_and_path() -> None:
    plan = Plan(Step(lambda x: x, name="spin", routes={"spin": when.payload(lambda _: True)}), max_iterations=5)
    result = plan.run(1)
    assert (result.ok, result.stop_reason, result.phase) == (False, "max_iterations", "step")
    assert result.path == ("spin",) * 5 and len(result.trace) == 5
    with pytest.raises(MaxIterationsExceeded) as caught:
        result.raise_for_stop()
    error = caught.value
    assert result.message == str(error)
    assert isinstance(error, PlanRuntimeError) and isinstance(error, RuntimeError)
    assert error.limit == 5 and error.path == ("spin",) * 5 and error.next_step == "spin"
    assert "max_iterations=5" in str(error) and "spin → spin" in str(error)
    # exactly max_iterations steps is fine
    assert Plan(echo("a"), echo("b"), max_iterations=2).run(0).path == ("a", "b")


def test_max_iterations_message_elides_long_paths() -> None:
    plan = Plan(Step(lambda x: x, name="spin", routes={"spin": when.payload(lambda _: True)}), max_iterations=100)
    assert "… (76 earlier) → spin" in plan.run(1).message


# -- routes_by on models, dataclasses and dicts ---------------------------------------------------------------------
class KindModel(BaseModel):
    kind: Literal["a", "b"] | None


@dataclasses.dataclass
class KindDC:
    kind: Literal["a", "b"] | None


class KindTD(TypedDict):
    kind: Literal["a", "b"] | None


@pytest.mark.parametrize("model", [KindModel, KindDC, KindTD])
@pytest.mark.parametrize(
    ("kind", "path"), [("a", ("x", "a", "c")), ("b", ("x", "b", "c")), (None, ("x", "a", "b", "c"))]
)
def test_routes_by_reads_models_dataclasses_and_dicts(model: Any, kind: str | None, path: tuple[str, ...]) -> None:
    plan = Plan(
        Step(lambda k: {"kind": k}, name="x", output=model, routes_by="kind", after_branches="c"),
        echo("a"),
        echo("b"),
        echo("c"),
    )
    result = plan.run(kind)
    assert result.path == path
    assert isinstance(result.envelope("x").payload, dict if model is KindTD else model)


def test_routes_by_value_that_is_not_a_step_is_linear() -> None:
    class Free(BaseModel):
        kind: Literal["a", "b"] | None

    plan = Plan(
        Step(lambda _: Free.model_construct(kind="zzz"), name="x", output=Free, routes_by="kind", after_branches="c"),
        echo("a"),
        echo("b"),
        echo("c"),
    )
    result = plan.run(None)
    assert result.path == ("x", "a", "b", "c")
    assert result.trace[0].why == "routes_by kind='zzz' is not a step; linear"


# -- errors -----------------------------------------------------------------------------------------------------
def test_a_failed_step_ends_the_run_with_a_stop_reason_not_an_exception(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="routegate.plan"):
        result = Plan(echo("a"), Step(boom, name="b"), echo("c")).run("x")
    assert not result.ok
    assert result.stop_reason == "step_error:ValueError"
    assert result.output is None
    assert result.path == ("a", "b")
    # a fault is reported by its class only; its text and traceback are in the log, the exception in the error
    report = "step 'b' raised ValueError (details in the log)"
    assert result.error is not None and result.error.message == result.message == report
    assert isinstance(result.error.exception, ValueError) and str(result.error.exception) == "boom"
    (logged,) = [r for r in caplog.records if r.name.startswith("routegate.plan") and r.exc_info]
    assert logged.levelno == logging.WARNING and "boom" in logged.exc_text  # type: ignore[operator]
    last = result.trace[-1]
    assert not last.ok and last.stop_reason == "step_error:ValueError" and last.why == "error" and last.next is None
    assert result.to_dict()["status"] == "stopped"
    assert result.to_dict()["error"] == {
        "type": "ValueError",
        "message": report,
        "stop_reason": "step_error:ValueError",
    }
    assert "boom" not in json.dumps(result.to_dict())


def test_when_errored_routes_a_failed_step_and_the_handler_gets_the_error() -> None:
    seen: list[Any] = []

    def fallback(error: ErrorInfo) -> str:
        seen.append(error)
        return f"fallback after {error.type}"

    plan = Plan(
        Step(
            boom,
            name="risky",
            routes={"fallback": when.errored(), "ok": when.field("x").not_empty()},
            after_branches="done",
        ),
        echo("ok"),
        Step(fallback, name="fallback"),
        echo("done"),
    )
    result = plan.run("x")
    assert result.ok
    assert result.path == ("risky", "fallback", "done")
    assert result.output == "done(fallback after ValueError)"
    assert isinstance(seen[0], ErrorInfo)
    assert (
        result.trace[0].ok is False and result.trace[0].why == "when.errored()" and result.trace[0].next == "fallback"
    )


def test_field_predicates_never_match_an_errored_envelope() -> None:
    plan = Plan(Step(boom, name="a", routes={"b": when.field("items").empty()}), echo("b"))
    result = plan.run(None)
    assert result.path == ("a",) and result.stop_reason == "step_error:ValueError"


def test_a_raising_predicate_on_an_errored_step_names_the_step_failure() -> None:
    plan = Plan(Step(boom, name="a", routes={"b": lambda env: env.payload.items}), echo("b"))
    with pytest.raises(PlanRuntimeError, match="the step itself failed with ValueError: boom"):
        plan.run(None)


def test_run_stop_error_from_a_target_sets_the_stop_reason() -> None:
    def stop(_: Any) -> Any:
        raise RunStopError("route_denied:billing", "not allowed here")

    result = Plan(Step(stop, name="a")).run(None)
    assert result.stop_reason == "route_denied:billing"
    assert result.error is not None and result.error.message == "not allowed here"


def test_a_sync_target_that_returns_a_coroutine_is_a_step_error() -> None:
    async def later(x: Any) -> Any:
        return x

    result = Plan(Step(lambda x: later(x), name="a")).run(1)
    assert result.stop_reason == "step_error:TypeError"
    assert result.error is not None and "declare it 'async def'" in result.error.message


# -- output validation ------------------------------------------------------------------------------------------
class Hits(BaseModel):
    items: list[str]


def test_output_validates_dicts_instances_and_json_text() -> None:
    for returned in ({"items": ["a"]}, Hits(items=["a"]), '{"items": ["a"]}', b'{"items": ["a"]}'):
        result = Plan(Step(lambda _, r=returned: r, name="a", output=Hits)).run(None)
        assert result.output == Hits(items=["a"]), returned


def test_output_validation_failure_is_a_step_error_that_can_be_routed() -> None:
    plan = Plan(
        Step(lambda _: {"items": 3}, name="a", output=Hits, routes={"repair": when.errored()}),
        Step(lambda e: e.type, name="repair"),
    )
    result = plan.run(None)
    assert result.path == ("a", "repair") and result.output == "ValidationError"
    assert isinstance(result.envelopes[0].error and result.envelopes[0].error.exception, ValidationError)


def test_output_can_be_any_type_pydantic_validates() -> None:
    assert Plan(Step(lambda _: "3", name="a", output=int)).run(None).output == 3
    assert Plan(Step(lambda _: '["b", "a"]', name="a", output=list[str])).run(None).output == ["b", "a"]


# -- sentinels and the store ------------------------------------------------------------------------------------
def test_from_start_and_from_step() -> None:
    plan = Plan(echo("a"), echo("b"), echo("c", context=from_start), echo("d", context=from_step("a")))
    result = plan.run("in")
    assert [env.payload for env in result.envelopes] == ["a(in)", "b(a(in))", "c(in)", "d(a(in))"]


def test_from_step_of_a_step_that_did_not_run_is_a_clear_runtime_error() -> None:
    plan = Plan(
        Step(
            lambda x: x,
            name="route",
            routes={"left": when.payload(lambda p: p == "l"), "right": when.payload(bool)},
            after_branches="join",
        ),
        echo("left"),
        echo("right"),
        echo("join", context=from_step("left")),
    )
    assert plan.run("l").output == "join(left(l))"
    with pytest.raises(PlanRuntimeError, match=r"context=from_step\('left'\) but that step has not run"):
        plan.run("r")


def test_writes_go_to_the_plan_store_even_when_it_starts_empty() -> None:
    store = Store()
    assert not store  # falsy when empty, still used
    plan = Plan(echo("a", writes="first"), echo("b", writes="second"), store=store)
    result = plan.run("x")
    assert store.to_dict() == {"first": "a(x)", "second": "b(a(x))"}
    assert result.store is store


def test_writes_go_to_a_per_run_store_or_one_passed_to_the_run() -> None:
    plan = Plan(echo("a", writes="k"))
    first, second = plan.run(1), plan.run(2)
    assert first.store is not second.store
    assert first.store["k"] == "a(1)" and second.store["k"] == "a(2)"
    mine = Store({"old": True})
    assert plan.run(3, store=mine).store is mine and mine.to_dict() == {"old": True, "k": "a(3)"}
    assert Plan(echo("a")).run(1).store is None


def test_failed_steps_do_not_write() -> None:
    store = Store()
    Plan(Step(boom, name="a", writes="k"), store=store).run(None)
    assert "k" not in store


def test_store_api() -> None:
    store = Store({"a": 1})
    store["b"] = {"x": [1]}
    store.write("c", "text")
    assert store.read("zzz", 0) == 0 and store.get("a") == 1 and "b" in store and len(store) == 3
    assert list(store) == ["a", "b", "c"] and store.keys() == ["a", "b", "c"]
    assert store.text() == 'a: 1\nb: {"x": [1]}\nc: text'
    store.delete("a")
    assert repr(store) == "Store({'b': {'x': [1]}, 'c': 'text'})"
    store.clear()
    assert store.to_dict() == {}


# -- targets ----------------------------------------------------------------------------------------------------
def test_async_callables_and_async_callable_objects() -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    class AddOne:
        name = "add_one"

        async def __call__(self, x: int) -> int:
            return x + 1

    plan = Plan(Step(double), Step(AddOne()))
    assert asyncio.run(plan.arun(5)).output == 11
    assert plan.run(5).output == 11  # sync run of a plan with async targets uses the per-thread loop


def test_step_target_protocol_sync_and_async() -> None:
    seen: list[StepContext] = []

    class Sync:
        def run_step(self, payload: Any, ctx: StepContext) -> Any:
            seen.append(ctx)
            return f"{ctx.step}:{payload}:{ctx.task}:{ctx.plan_input}"

    class Async:
        async def run_step(self, payload: Any, ctx: StepContext) -> Any:
            return f"{payload}+{ctx.sources_text()}"

    store = Store({"k": "v"})
    plan = Plan(
        Step(Sync(), name="s", task="do it", writes="w"), Step(Async(), name="a", sources=[store, "note"]), store=store
    )
    result = plan.run("in")
    assert result.output == "s:in:do it:in+k: v\nw: s:in:do it:in\n\nnote"
    assert seen[0].store is store


class ScriptedRouter:
    def __init__(self) -> None:
        self.requests: list[RouteRequest] = []

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.requests.append(request)
        return RouteDecision(raw={"kind": "route", "target": "billing", "args": {"ticket": request.goal}})


def billing(ticket: str) -> dict[str, Any]:
    return {"status": "done", "domain": "billing", "result": {"ticket": ticket}}


def test_a_routing_agent_step_gets_the_payload_as_text_and_returns_its_run_result() -> None:
    router = ScriptedRouter()
    agent = RoutingAgent(workers=[worker(billing, args=TicketArgs, inline=True)], router=router, name="desk")
    plan = Plan(
        Step(lambda text: {"ticket": text}, name="prepare"),
        Step(agent, task="Answer the customer.", routes={"escalate": when.field("status").equals("stopped")}),
        Step(lambda run: run.output, name="reply"),
        Step(lambda run: "escalated", name="escalate"),
    )
    result = plan.run("refund please")
    run = result.envelope("desk").payload
    assert isinstance(run, RunResult) and run.ok
    assert router.requests[0].goal == '{"ticket": "refund please"}'
    assert router.requests[0].task == "Answer the customer." and router.requests[0].context == {}
    assert result.path == ("prepare", "desk", "reply", "escalate")  # linear: the last step is the skip pattern
    assert "billing" in result.envelope("reply").payload


def test_a_routing_agent_step_refuses_output() -> None:
    agent = RoutingAgent(workers=[worker(billing, args=TicketArgs, inline=True)], router=ScriptedRouter())
    with pytest.raises(ConfigurationError, match="output= does not apply to a RoutingAgent"):
        Plan(Step(agent, output=Hits))


def test_nested_plans_run_as_one_step() -> None:
    inner = Plan(echo("rank"), echo("write"), name="branch", store=None)
    outer = Plan(echo("search", writes="hits"), Step(inner), echo("log"))
    result = outer.run("q")
    assert result.path == ("search", "branch", "log")
    assert result.output == "log(write(rank(search(q))))"
    nested = result.envelope("branch").metadata["plan"]
    assert nested.path == ("rank", "write")
    assert result.store is not None and result.store["hits"] == "search(q)"


def test_a_nested_plan_failure_is_the_outer_step_failure_and_writes_to_the_outer_store() -> None:
    inner = Plan(echo("ok", writes="inner"), Step(boom, name="bad"), name="branch")
    outer = Plan(echo("a", writes="outer"), Step(inner, routes={"rescue": when.errored()}), echo("rescue"))
    result = outer.run("x")
    assert result.path == ("a", "branch", "rescue")
    assert result.trace[1].stop_reason == "step_error:ValueError"
    assert result.store is not None and result.store.to_dict() == {"outer": "a(x)", "inner": "ok(a(x))"}


def test_plan_runtime_errors_in_a_nested_plan_propagate() -> None:
    def broken(env: Envelope) -> bool:
        raise KeyError("oops")

    inner = Plan(Step(lambda x: x, name="i", routes={"i": broken}), name="inner")
    with pytest.raises(PlanRuntimeError, match="routes predicate"):
        Plan(Step(inner)).run(1)


def test_a_nested_plan_that_loops_stops_the_outer_step_with_max_iterations() -> None:
    inner = Plan(
        Step(lambda x: x, name="i", routes={"i": when.payload(lambda _: True)}), name="inner", max_iterations=3
    )
    result = Plan(Step(inner)).run(1)
    assert (result.stop_reason, result.phase, result.path) == ("max_iterations", "step", ("inner",))
    with pytest.raises(MaxIterationsExceeded) as caught:
        result.raise_for_stop()
    assert caught.value.limit == 3 and caught.value.path == ("i", "i", "i")


class FakeChatModel:
    """Implements the StructuredChatModel protocol with scripted replies; records what it was sent."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> str:
        self.calls.append((messages, schema))
        return self.replies.pop(0)


class Triage(BaseModel):
    summary: str
    severity: Literal["urgent", "normal"] | None = None


def test_an_llm_step_validates_json_into_output_and_routes_by_its_field() -> None:
    model = FakeChatModel('{"summary": "site down", "severity": "urgent"}')
    plan = Plan(
        Step(
            model,
            name="classify",
            task="Classify the ticket.",
            output=Triage,
            routes_by="severity",
            after_branches="archive",
        ),
        echo("urgent"),
        echo("normal"),
        Step(lambda x: x, name="archive"),
    )
    result = plan.run({"ticket": "the site is down"})
    assert result.path == ("classify", "urgent", "archive")
    assert result.envelope("classify").payload == Triage(summary="site down", severity="urgent")
    messages, schema = model.calls[0]
    assert messages == [
        {"role": "system", "content": "Classify the ticket."},
        {"role": "user", "content": '{"ticket": "the site is down"}'},
    ]
    assert schema == Triage.model_json_schema()
    assert not model.replies


def test_an_llm_step_with_bad_json_is_a_step_error() -> None:
    result = Plan(Step(FakeChatModel("not json"), name="c", output=Triage)).run("x")
    assert result.stop_reason == "step_error:ValidationError"


def test_an_llm_step_without_output_asks_for_a_string_and_accepts_text() -> None:
    model = FakeChatModel('"a JSON string"', "plain text", '{"an": "object"}')
    store = Store({"verdict": "too long"})
    plan = Plan(Step(model, name="write", sources=[store]), max_iterations=3)
    assert plan.run("q").output == "a JSON string"
    assert plan.run(Hits(items=["x"])).output == "plain text"
    assert plan.run("q").output == '{"an": "object"}'
    messages, schema = model.calls[1]
    assert schema == {"type": "string"}
    assert messages[0]["content"].endswith("Context:\nverdict: too long")
    assert messages[1]["content"] == '{"items":["x"]}'


def test_an_llm_step_must_return_text() -> None:
    class Bad:
        async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> Any:
            return {"not": "text"}

    result = Plan(Step(Bad(), name="c")).run("x")
    assert result.stop_reason == "step_error:TypeError"


class FakeCompleter:
    """The shape of routegate.llm's ChatModel: async complete(messages, *, json_mode) -> str."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[dict[str, str]], bool]] = []

    async def complete(
        self, messages: list[dict[str, str]], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        self.calls.append((messages, json_mode))
        return self.replies.pop(0)


def test_a_plain_chat_model_step_gets_the_schema_in_the_prompt_and_json_mode() -> None:
    model = FakeCompleter('{"summary": "s", "severity": "normal"}', "free text")
    plan = Plan(
        Step(model, name="classify", task="Classify.", output=Triage, routes_by="severity", after_branches="done"),
        echo("urgent"),
        echo("normal"),
        Step(lambda x: x, name="done"),
    )
    assert plan.run("ticket").path == ("classify", "normal", "done")
    messages, json_mode = model.calls[0]
    assert json_mode is True
    assert messages[0]["content"].startswith("Classify.\n\nReply with one JSON object that matches this JSON schema:\n")
    assert '"severity"' in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "ticket"}
    text = Plan(Step(model, name="write", sources=["be brief"])).run("q")
    assert text.output == "free text"
    assert model.calls[1][1] is False
    assert model.calls[1][0][0]["content"] == "You are the step 'write' of a plan.\n\nContext:\nbe brief"


def test_a_plain_chat_model_must_return_text() -> None:
    class Bad:
        async def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> Any:
            return None

    assert Plan(Step(Bad(), name="c")).run("x").stop_reason == "step_error:TypeError"


# -- sync/async entry points -------------------------------------------------------------------------------------
async def test_run_inside_a_running_loop_is_refused_with_a_hint() -> None:
    async def a(x: Any) -> Any:
        return x

    for plan in (Plan(echo("sync")), Plan(Step(a))):
        with pytest.raises(ConfigurationError, match=r"use 'await \.\.\.arun\(\.\.\.\)'"):
            plan.run(1)


async def test_concurrent_runs_of_one_plan_are_independent() -> None:
    async def slow_echo(x: int) -> int:
        await asyncio.sleep(0)
        return x

    plan = Plan(
        Step(slow_echo),
        Step(lambda x: x * 10, name="times", routes={"big": when.payload(lambda v: v > 50)}),
        Step(lambda x: -x, name="big"),
    )
    results = await asyncio.gather(*(plan.arun(i) for i in range(10)))
    assert [r.output for r in results] == [-(i * 10) for i in range(10)]
    assert all(r.path == ("slow_echo", "times", "big") for r in results)


# -- the trace ---------------------------------------------------------------------------------------------------
def test_the_trace_is_the_core_format_with_route_and_reason() -> None:
    plan = Plan(
        Step(
            lambda x: {"severity": x},
            name="classify",
            routes={
                "urgent": when.field("severity").equals("urgent"),
                "normal": when.field("severity").not_equals("urgent"),
            },
            after_branches="archive",
        ),
        echo("urgent"),
        echo("normal"),
        echo("archive"),
        echo("last"),
    )
    result = plan.run("urgent")
    trace = result.trace
    assert all(isinstance(entry, TraceEntry) for entry in trace)
    assert result.trace is trace  # built once
    assert [(e.attempt, e.target, e.phase, e.ok, e.next, e.why) for e in trace] == [
        (1, "classify", "step", True, "urgent", "when.field('severity').equals('urgent')"),
        (2, "urgent", "step", True, "archive", "after_branches='archive' of 'classify'"),
        (3, "archive", "step", True, None, "linear"),
        (4, "last", "step", True, None, "end"),
    ]
    as_dict = result.to_dict()
    assert as_dict["trace"][0] == {
        "attempt": 1,
        "target": "classify",
        "ok": True,
        "phase": "step",
        "elapsed_ms": trace[0].elapsed_ms,
        "why": "when.field('severity').equals('urgent')",
        "next": "urgent",
    }
    assert as_dict["path"] == ["classify", "urgent", "archive", "last"]
    assert as_dict["payload"] == "last(archive(urgent({'severity': 'urgent'})))"
    json.dumps(as_dict)
    assert repr(result) == "PlanResult(stop_reason='success', path=['classify', 'urgent', 'archive', 'last'])"


def test_envelope_basics() -> None:
    env = Envelope({"a": 1}, step="s")
    assert env.ok and env.metadata == {} and env.text() == '{"a": 1}'
    assert repr(env) == "Envelope(step='s', payload={'a': 1})"
    failed = Envelope(error=ErrorInfo.from_exception(KeyError("k")), step="s")
    assert not failed.ok and failed.to_dict()["error"]["stop_reason"] == "step_error:KeyError"
    assert Envelope(Hits(items=[])).text() == '{"items":[]}'
    assert Envelope(KindDC(kind="a")).text() == '{"kind": "a"}'
    assert Envelope(None).text() == ""


def test_one_info_line_per_run_without_user_text(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="routegate.plan.plan"):
        Plan(echo("a"), echo("b"), name="demo").run("secret user text")
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    assert line.startswith("plan demo path=a>b stop_reason=success latency_ms=")
    assert "secret" not in line


def test_envelope_metadata_in_to_dict_and_callable_names() -> None:
    from routegate.plan.when import _MISSING, callable_name

    assert Envelope(1, metadata={"k": 2}, step="s").to_dict() == {
        "step": "s",
        "payload": 1,
        "metadata": {"k": 2},
        "elapsed_ms": 0.0,
    }

    class Check:
        def __call__(self, env: Envelope) -> bool:
            return True

    assert callable_name(Check()) == "Check" and repr(_MISSING) == "MISSING"
    plan = Plan(Step(lambda x: x, name="a", routes={"b": Check()}), echo("b"))
    assert plan.run(1).trace[0].why == "Check"
