"""The one result type, as the routing agent hands it out: an ``AgentResult`` is a ``RunResult`` whose ``outcome``
is the only stop value, whose ``run_id`` is the run's, and whose old attribute name still reads, with a warning."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from core._scripted import ListRouter, route
from routegate import RunContext, RunResult
from routegate.apps.triage import build_triage_agent
from routegate.core import AgentResult, FinalEvent, Outcome, TicketArgs, worker
from routegate.errors import RunStopError
from routegate.plan import RoutingAgent


def test_a_successful_run_is_a_run_result_whose_output_is_the_answer() -> None:
    result = build_triage_agent(router=ListRouter([route("billing_specialist")])).run("refund please")
    assert isinstance(result, AgentResult) and isinstance(result, RunResult)
    assert result.outcome is Outcome.success() and result.ok and result.status == "ok"
    assert result.output is not None and result.output == result.to_dict()["answer"]
    assert result.raise_for_stop() is result
    assert [entry.to_dict() for entry in result.trace] == result.to_dict()["trace"]


@pytest.mark.parametrize(
    ("outputs", "goal", "stop_reason", "phase"),
    [
        ([], " ", "invalid_goal:empty", "route"),
        (["not json"], "refund", "invalid_route:non_json", "route"),
        ([route("nobody")], "refund", "invalid_route:route_not_allowed:nobody", "route"),
    ],
)
def test_a_stop_is_stored_once_as_the_outcome_and_raises_as_a_run_stop(
    outputs: list[object], goal: str, stop_reason: str, phase: str
) -> None:
    result = build_triage_agent(router=ListRouter(outputs)).run(goal)
    assert result.outcome == Outcome(False, stop_reason, phase, result.message)  # type: ignore[arg-type]
    assert (result.ok, result.status, result.stop_reason, result.phase) == (False, "stopped", stop_reason, phase)
    assert result.output is None and result.to_dict()["answer"] is None
    assert result.message and result.to_dict()["message"] == result.outcome.message
    with pytest.raises(RunStopError) as raised:
        result.raise_for_stop()
    assert (raised.value.stop_reason, raised.value.phase, raised.value.message) == (stop_reason, phase, result.message)


def test_the_run_id_is_the_one_the_workers_saw_and_the_log_line_names(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    @worker(args=TicketArgs, inline=True)
    def billing(ticket: str, ctx: RunContext[Any]) -> dict[str, Any]:
        seen.append(ctx.run_id)
        return {"status": "done", "result": {"ok": True}}

    agent = RoutingAgent(workers=[billing], router=ListRouter([route("billing")]))
    with caplog.at_level(logging.INFO, logger="routegate.plan.agent"):
        result = agent.run("refund")
    assert seen == [result.run_id] and len(result.run_id) == 16
    assert [r.args[0] for r in caplog.records if r.getMessage().startswith("run ")] == [result.run_id]
    assert result.to_dict()["run_id"] == result.run_id


def test_answer_is_the_old_name_of_output_and_warns_at_the_line_that_reads_it() -> None:
    result = build_triage_agent(router=ListRouter([route("billing_specialist")])).run("refund please")
    with pytest.warns(DeprecationWarning, match=r"AgentResult\.answer is deprecated: read AgentResult\.output") as w:
        answer = result.answer  # type: ignore[deprecated]
    assert answer == result.output
    assert w[0].filename == __file__  # the warning points at the reader, not at routegate


def test_the_agent_stream_ends_with_the_final_event_holding_the_same_result() -> None:
    async def events() -> list[object]:
        agent = build_triage_agent(router=ListRouter([route("billing_specialist")]))
        return [event async for event in agent.iter("refund please")]

    last = asyncio.run(events())[-1]
    assert isinstance(last, FinalEvent) and isinstance(last.result, AgentResult) and last.result.ok
    assert last.to_dict()["result"] == last.result.to_dict()


def test_a_runtime_of_your_own_returns_the_same_type() -> None:
    stopped: RunResult[dict[str, int] | None] = RunResult(
        Outcome.stopped("quota:used_up", "delegate", "no quota"), None
    )
    assert stopped.to_dict() == {
        "status": "stopped",
        "stop_reason": "quota:used_up",
        "phase": "delegate",
        "message": "no quota",
        "output": None,
        "trace": [],
        "run_id": stopped.run_id,
        "elapsed_ms": 0.0,
    }
    with pytest.raises(RunStopError, match="no quota"):
        stopped.raise_for_stop()
    done = RunResult(Outcome.success(), {"n": 1}, run_id="r-1", elapsed_ms=1.23456)
    assert list(done.to_dict().items()) == [
        ("status", "ok"),
        ("stop_reason", "success"),
        ("output", {"n": 1}),
        ("trace", []),
        ("run_id", "r-1"),
        ("elapsed_ms", 1.235),
    ]
    assert repr(done) == "RunResult(stop_reason='success', output={'n': 1})"


def test_an_outcome_as_error_carries_its_stop_reason_message_and_phase() -> None:
    """The one conversion of a stop to the exception that carries it (steps return it; ``raise_for_stop`` raises it)."""
    error = Outcome.stopped("route_denied:billing", "delegate", "billing is not allowed").as_error()
    assert isinstance(error, RunStopError)
    assert (error.stop_reason, error.message, error.phase) == (
        "route_denied:billing",
        "billing is not allowed",
        "delegate",
    )
    with pytest.raises(RunStopError) as raised:
        RunResult(Outcome.stopped("max_seconds", "route"), None).raise_for_stop()
    assert (raised.value.stop_reason, raised.value.message, raised.value.phase) == (
        "max_seconds",
        "max_seconds",
        "route",
    )
