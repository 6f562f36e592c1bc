"""The public runtime seam (``routegate.plan.Runtime``), from a user's side: the "Build a runtime" example of
docs/plan.md runs; a runtime's plan is the runtime's (its own doors and being a step refuse); a run in a context the
caller started answers to that context's clock; a runtime run as a step is part of the outer run; the hooks are
called as documented."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from routegate.core import Budget, FinalEvent, RunContext, RunResult
from routegate.errors import ConfigurationError, RunStopError
from routegate.plan import Plan, PlanCompileError, PlanResult, Runtime, Step, StepEvent
from routegate.plan.runtime import RunSpans, TracedSpans

DOC = Path(__file__).resolve().parents[2] / "docs" / "plan.md"


def _section_example(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return str(block)


def test_the_build_a_runtime_example_of_the_docs_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a reader runs it: a module of its own (its dataclass resolves its annotations there), its asserts."""
    module = types.ModuleType("build_a_runtime")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    code = compile(_section_example("Build a runtime"), "docs/plan.md[Build a runtime]", "exec", dont_inherit=True)
    exec(code, module.__dict__)
    assert module.done.queue == "billing" and module.refused.stop_reason == "invalid_ticket:empty"


class Said(RunResult[Any]):
    __slots__ = ("state",)

    def __init__(self, ended: PlanResult[Any], state: Any) -> None:
        super().__init__(ended.outcome, ended.output, ended.trace, ended.run_id, ended.elapsed_ms)
        self.state = state


class Saying(Runtime[Any, Said]):
    owner = "Saying"
    logger = logging.getLogger("tests.saying")

    def __init__(self) -> None:
        self.contexts: list[RunContext[Any]] = []

    def result(self, state: Any, ended: PlanResult[Any], ctx: RunContext[Any]) -> Said:
        self.contexts.append(ctx)
        return Said(ended, state)


async def echo(text: str, ctx: RunContext[Any]) -> str:
    return f"{text}!"


def saying(*steps: Step, budget: Budget | None = None) -> Saying:
    runtime = Saying()
    Plan(*(steps or (Step(echo),)), budget=budget, name="saying", runtime=runtime)
    return runtime


def test_a_runtimes_plan_refuses_its_own_doors_and_names_its_owner() -> None:
    runtime = saying()
    with pytest.raises(ConfigurationError, match=r"^run\(\) of .*this is the plan of a Saying.*run the Saying instead"):
        runtime.plan.run("x")
    with pytest.raises(ConfigurationError, match=r"^arun\(\) of "):
        asyncio.run(runtime.plan.arun("x"))
    with pytest.raises(ConfigurationError, match=r"^iter\(\) of "):
        runtime.plan.iter("x")
    assert runtime.run("x").output == "x!"


def test_a_runtimes_plan_is_not_a_step_and_a_runtime_runs_one_plan() -> None:
    runtime = saying()
    with pytest.raises(PlanCompileError, match=r"is the plan of a Saying; make the Saying itself the step"):
        Plan(Step(runtime.plan, name="inner"))
    with pytest.raises(PlanCompileError, match=r"Saying is already the runtime of Plan\('saying'"):
        Plan(Step(echo), runtime=runtime)
    with pytest.raises(ConfigurationError, match=r"Saying is the runtime of no plan yet: Plan\(\.\.\., runtime=it\)"):
        Saying().run("x")
    with pytest.raises(PlanCompileError, match=r"runtime= must be a routegate.plan.Runtime"):
        Plan(Step(echo), runtime=object())  # type: ignore[arg-type]


def test_a_runtime_without_a_result_says_what_to_define() -> None:
    runtime: Runtime[Any, Any] = Runtime()
    Plan(Step(echo), runtime=runtime)
    with pytest.raises(NotImplementedError, match=r"Runtime must define result\(state, ended, ctx\)"):
        runtime.run("x")


def test_every_run_of_a_runtime_has_a_context_and_the_result_sees_it() -> None:
    runtime = saying(Step(str.upper, name="shout"))  # a step that asks for no context: the run still has one
    result = runtime.run("hi", deps={"who": "me"})
    assert (result.output, result.state) == ("HI", "hi")
    (ctx,) = runtime.contexts
    assert ctx.deps == {"who": "me"} and ctx.run_id == result.run_id


async def test_a_run_in_a_context_the_caller_started_answers_to_its_clock() -> None:
    """The desk's case: the turn's context starts when the turn arrives; what it waits for before the run (its
    session's lock) counts against the run's deadline."""
    runtime = saying(budget=Budget(max_seconds=5))
    started = RunContext.start({"who": "me"}, Budget(max_seconds=5))
    started.deadline = time.monotonic() - 1.0  # the caller waited past the deadline before the run began
    late = await runtime.arun("x", context=started)
    assert (late.stop_reason, late.phase, late.run_id) == ("max_seconds", "step", started.run_id)
    assert late.message.startswith("max_seconds=5 reached after 6.") and "before step 'echo' ran" in late.message
    in_time = await runtime.arun("x", context=RunContext.start(None, Budget(max_seconds=5), run_id="caller-run"))
    assert (in_time.output, in_time.run_id) == ("x!", "caller-run")
    assert runtime.contexts[-1].run_id == "caller-run"
    with pytest.raises(ConfigurationError, match=r"takes deps= or context="):
        await runtime.arun("x", deps=1, context=started)


async def test_a_run_in_the_callers_context_sends_no_final_event_of_its_own() -> None:
    sent: list[object] = []
    runtime = saying()
    ctx = RunContext.start(None, Budget(), emit=sent.append)
    assert (await runtime.arun("x", context=ctx)).ok
    assert sent == []  # the caller sends its own final event, when it is done


def test_a_plain_plan_runs_in_a_context_the_caller_started_too() -> None:
    plan = Plan(Step(echo), budget=Budget(max_seconds=5))
    ctx = RunContext.start("deps", Budget(max_seconds=5), run_id="outer")
    result = asyncio.run(plan.arun("x", context=ctx))
    assert (result.output, result.run_id) == ("x!", "outer")
    with pytest.raises(ConfigurationError, match=r"takes deps= or context="):
        asyncio.run(plan.arun("x", deps=1, context=ctx))


async def test_a_streamed_runtime_run_sends_what_its_steps_send_then_its_result() -> None:
    async def tell(text: str, ctx: RunContext[Any]) -> str:
        ctx.send(("told", text))
        return text

    runtime = saying(Step(tell))
    runtime.step_events = False  # only what its steps send, then the final event
    events = [event async for event in runtime.iter("x")]
    assert events[0] == ("told", "x")
    assert isinstance(events[-1], FinalEvent) and isinstance(events[-1].result, Said) and len(events) == 2
    runtime = saying(Step(tell))
    events = [event async for event in runtime.iter("y")]
    assert [type(event) for event in events] == [tuple, StepEvent, FinalEvent]


async def test_a_runtime_run_as_a_step_is_part_of_the_outer_run() -> None:
    class Inner(Saying):
        async def run_step(self, payload: Any, ctx: Any) -> Said:
            return await self.arun_step(payload, ctx)

    inner = Inner()
    Plan(Step(echo), runtime=inner)
    outer = Plan(Step(inner, name="inner"), budget=Budget(max_seconds=5))
    result = await outer.arun("x")
    said = result.output
    assert isinstance(said, Said) and said.output == "x!"
    assert said.run_id == result.run_id  # one run, one id


def test_a_runtime_may_end_its_runs_by_returning_a_stop() -> None:
    async def refuse(text: str, ctx: RunContext[Any]) -> RunStopError:
        return RunStopError("refused:x", "no", phase="route")

    assert saying(Step(refuse)).run("x").ok  # without returns_stops, a returned stop is an ordinary output

    class Returning(Saying):
        returns_stops = True

    runtime = Returning()
    Plan(Step(refuse), runtime=runtime)
    stopped = runtime.run("x")
    assert (stopped.stop_reason, stopped.phase, stopped.message) == ("refused:x", "route", "no")


def test_a_runtimes_spans_and_log_line_are_its_own(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    class Traced(Saying):
        def spans(self, tracer: Any, state: Any, ctx: RunContext[Any]) -> RunSpans:
            calls.append("spans")
            return TracedSpans(tracer, "tests.saying", {"tests.state": str(state)}, steps=False)

        def log(self, result: Said, ended: PlanResult[Any]) -> None:
            self.logger.info("said %s path=%s", result.output, ">".join(ended.path))

    runtime = Traced()
    Plan(Step(echo), runtime=runtime)
    with caplog.at_level(logging.INFO, logger="tests.saying"):
        assert runtime.run("x").ok
    assert [r.getMessage() for r in caplog.records if r.name == "tests.saying"] == ["said x! path=echo"]
    assert calls == [] or calls == ["spans"]  # asked only when a tracer provider is installed
