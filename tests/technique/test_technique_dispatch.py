"""Dispatch goes through the core policy boundary and gateway: refusals carry the core stop reasons."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from routegate.core import Budget, Worker, WorkerArgs
from routegate.errors import ConfigurationError, RunStopError
from routegate.technique import DispatchResult, OutputKind, TechniqueDispatcher, TechniqueRouter
from routegate.technique.dispatch import HandlerRegistry
from routegate.technique.sandbox import CodeHandler, SandboxLimits, SandboxRunner
from routegate.technique.types import CodeBlock, TechniqueItem
from technique._sandbox_procs import needs_os_sandbox

ROUTER = TechniqueRouter()


@dataclass
class Ran:
    code: str
    stop_reason: str = "success"


class EchoArgs(WorkerArgs):
    code: str


@dataclass
class EchoHandler:
    """A code handler whose worker only records what it was asked to run."""

    calls: list[str] = field(default_factory=list)
    behaviour: str = "ok"
    kind: OutputKind = OutputKind.CODE_BLOCK
    prefix: str = "code"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        assert isinstance(item, CodeBlock)
        return f"code:{item.language}", {"code": item.code}

    def schema(self, target: str) -> type[BaseModel] | None:
        return EchoArgs

    def worker(self, target: str) -> Worker | None:
        if target == "code:ruby":
            return None

        async def run(code: str) -> Ran:
            self.calls.append(code)
            if self.behaviour == "raise":
                raise ValueError("boom")
            if self.behaviour == "stop":
                raise RunStopError("custom_stop:now", "stopped by the worker")
            if self.behaviour == "slow":
                await asyncio.sleep(30)
            if self.behaviour == "fail":
                return Ran(code, "sandbox_exit:2")
            return Ran(code)

        return Worker(name=target, fn=run, args_model=EchoArgs)


def _dispatch(text: str, handler: EchoHandler | None = None, **kwargs: Any) -> DispatchResult:
    dispatcher = TechniqueDispatcher(handlers=[handler or EchoHandler()], **kwargs)
    return dispatcher.dispatch(ROUTER.classify(text))


def test_prose_needs_nothing() -> None:
    result = _dispatch("just words", allow=["code:python"])
    assert (result.kind, result.status, result.stop_reason, result.output) == ("prose", "ok", "success", ())


def test_allowed_code_runs_and_results_carry_a_stop_reason() -> None:
    handler = EchoHandler()
    result = _dispatch("```python\nprint(1)\n```\n```py\nprint(2)\n```", handler, allow=["code:python"])
    assert result.ok
    assert handler.calls == ["print(1)", "print(2)"]
    assert [(o.target, o.stop_reason) for o in result.output] == [("code:python", "success")] * 2
    assert result.to_dict()["outcomes"][0] == {
        "target": "code:python",
        "stop_reason": "success",
        "value": "Ran(code='print(1)', stop_reason='success')",
    }


def test_target_outside_the_policy_allowlist() -> None:
    handler = EchoHandler()
    result = _dispatch("```bash\nrm -rf /\n```", handler, allow=["code:python"])
    assert (result.status, result.stop_reason, result.phase) == (
        "stopped",
        "invalid_route:route_not_allowed:code:bash",
        "route",
    )
    assert handler.calls == []


def test_target_outside_the_execution_allowlist() -> None:
    handler = EchoHandler()
    result = _dispatch("```python\nx = 1\n```", handler, allow=["code:python"], execution_allow=[])
    assert (result.stop_reason, result.phase) == ("route_denied:code:python", "delegate")
    assert handler.calls == []


def test_allowed_target_nobody_serves() -> None:
    result = _dispatch("```ruby\nputs 1\n```", allow=["code:ruby"])
    assert result.stop_reason == "route_missing:code:ruby"


def test_arguments_checked_against_the_target_schema() -> None:
    class Strict(WorkerArgs):
        code: str
        timeout: int

    result = _dispatch("```python\nx = 1\n```", allow=["code:python"], schemas={"code:python": Strict})
    assert result.stop_reason == "invalid_route:missing_timeout"


def test_max_delegations_bounds_the_parts_run() -> None:
    handler = EchoHandler()
    text = "".join(f"```python\nprint({i})\n```\n" for i in range(3))
    result = _dispatch(text, handler, allow=["code:python"], budget=Budget(max_delegations=2))
    assert (result.stop_reason, result.phase) == ("max_delegations", "delegate")
    assert handler.calls == []  # all or none: the output asks for more than the budget, nothing runs
    assert [o.stop_reason for o in result.output] == ["max_delegations"]
    assert result.message == "max_delegations=2, but the output has 3 parts"


def test_the_same_part_twice_is_a_loop() -> None:
    handler = EchoHandler()
    result = _dispatch("```python\nprint(1)\n```\n```python\nprint(1)\n```", handler, allow=["code:python"])
    assert result.stop_reason == "loop_detected"
    assert handler.calls == []


def test_a_failed_part_stops_the_rest() -> None:
    handler = EchoHandler(behaviour="fail")
    result = _dispatch("```python\nprint(1)\n```\n```python\nprint(2)\n```", handler, allow=["code:python"])
    assert (result.stop_reason, result.phase) == ("sandbox_exit:2", "delegate")
    assert handler.calls == ["print(1)"]


def test_worker_exceptions_and_stop_signals() -> None:
    result = _dispatch("```python\nx\n```", EchoHandler(behaviour="raise"), allow=["code:python"])
    assert result.stop_reason == "route_error:code:python"
    assert result.message == "the handler for 'code:python' raised ValueError (details in the log)"
    assert "boom" not in str(result.to_dict())
    result = _dispatch("```python\nx\n```", EchoHandler(behaviour="stop"), allow=["code:python"])
    assert (result.stop_reason, result.message) == ("custom_stop:now", "stopped by the worker")


def test_max_seconds_bounds_the_whole_dispatch() -> None:
    result = _dispatch(
        "```python\nx\n```", EchoHandler(behaviour="slow"), allow=["code:python"], budget=Budget(max_seconds=0.05)
    )
    assert result.stop_reason == "max_seconds"


def test_no_handler_for_the_kind() -> None:
    result = _dispatch('<tool_call>{"name": "a.b", "arguments": {}}</tool_call>', allow=["mcp:a/b"])
    assert (result.kind, result.stop_reason) == ("tool_call", "route_missing:tool_call")


async def test_dispatch_inside_an_event_loop_uses_adispatch() -> None:
    dispatcher = TechniqueDispatcher(handlers=[EchoHandler()], allow=["code:python"])
    classified = ROUTER.classify("```python\nx = 1\n```")
    with pytest.raises(ConfigurationError, match="adispatch"):
        dispatcher.dispatch(classified)
    assert (await dispatcher.adispatch(classified)).ok


def test_registry_refuses_misconfiguration() -> None:
    registry = HandlerRegistry([EchoHandler()])
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(EchoHandler())
    with pytest.raises(ConfigurationError, match="prose is never dispatched"):
        HandlerRegistry([EchoHandler(kind=OutputKind.PROSE)])
    with pytest.raises(ConfigurationError, match="prefix"):
        HandlerRegistry([EchoHandler(kind=OutputKind.TOOL_CALL, prefix="a:b")])
    with pytest.raises(ConfigurationError, match="needs kind, prefix"):
        registry.register(object())  # type: ignore[arg-type]  # misuse on purpose
    assert registry.for_target("code:python") is not None
    assert registry.for_target("python") is None


@needs_os_sandbox
def test_real_sandbox_through_the_policy() -> None:
    runner = SandboxRunner(limits=SandboxLimits(wall_seconds=5, cpu_seconds=1))
    dispatcher = TechniqueDispatcher(handlers=[CodeHandler(runner)], allow=["code:python"])
    result = dispatcher.dispatch(ROUTER.classify("Sum:\n```python\nprint(sum(range(10)))\n```"))
    assert result.ok
    assert result.output[0].to_dict()["value"]["stdout"] == "45\n"
    result = dispatcher.dispatch(ROUTER.classify("```python\nwhile True:\n    pass\n```"))
    assert (result.stop_reason, result.phase) == ("sandbox_timeout:cpu", "delegate")
    assert "cpu_seconds=1" in result.message
    blank = dispatcher.dispatch(ROUTER.classify("```python\n   \n```"))
    assert blank.kind is OutputKind.PROSE  # an empty block is not extracted at all


# -- the one result type ------------------------------------------------------------------------------------------
def test_a_dispatch_is_a_run_result_with_one_trace_line_per_part_and_the_callers_run_id() -> None:
    from routegate import RunResult
    from routegate.core import RunContext

    handler = EchoHandler(behaviour="fail")
    dispatcher = TechniqueDispatcher(handlers=[handler], allow=["code:python"])
    outer: RunContext[None] = RunContext(None)
    result = asyncio.run(dispatcher.adispatch(ROUTER.classify("```python\n1\n```\n```python\n2\n```"), context=outer))
    assert isinstance(result, RunResult) and result.run_id == outer.run_id
    assert (result.ok, result.stop_reason, result.phase) == (False, "sandbox_exit:2", "delegate")
    assert result.outcome.stop_reason == result.output[-1].outcome.stop_reason == "sandbox_exit:2"
    assert [(e.target, e.phase, e.ok) for e in result.trace] == [("code:python", "delegate", False)]
    assert "trace" not in result.to_dict() and "run_id" not in result.to_dict()  # the JSON form is unchanged


def test_a_policy_refusal_is_the_dispatch_traces_one_line() -> None:
    result = _dispatch("```ruby\nputs 1\n```", allow=["code:python"])
    assert result.stop_reason == "invalid_route:route_not_allowed:code:ruby"
    assert [(e.phase, e.stop_reason) for e in result.trace] == [("route", result.stop_reason)]
    assert len(result.run_id) == 16  # a dispatch of its own has its own id


def test_outcomes_is_the_old_name_of_output_and_warns() -> None:
    result = _dispatch("```python\nprint(1)\n```", allow=["code:python"])
    with pytest.warns(
        DeprecationWarning, match=r"^DispatchResult\.outcomes is deprecated: read DispatchResult\.output"
    ):
        parts = result.outcomes  # type: ignore[deprecated]
    assert parts == result.output and [p.target for p in parts] == ["code:python"]
