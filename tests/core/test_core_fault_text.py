"""A fault's text (an exception message that may hold a secret) never reaches the run's result; the log has it."""

from __future__ import annotations

import logging

import pytest

from core._scripted import ListRouter, route
from routegate.core import FinalizeRequest, RouteRequest, RoutingAgent, TicketArgs, worker

SECRET = "password=hunter2-in-the-exception"


@worker(args=TicketArgs, description="raises with a secret in its message")
def leaky(ticket: str) -> dict[str, object]:
    raise RuntimeError(SECRET)


@worker(args=TicketArgs, description="answers")
def fine(ticket: str) -> dict[str, object]:
    return {"status": "done", "domain": "x", "result": {"ok": True}}


class LeakyRouter:
    async def decide(self, request: RouteRequest) -> object:
        raise ValueError(SECRET)


class LeakyFinalizer:
    async def finalize(self, request: FinalizeRequest) -> str:
        raise KeyError(SECRET)


@pytest.mark.parametrize(
    ("agent", "stop_reason"),
    [
        (RoutingAgent(workers=[leaky], router=ListRouter([route("leaky")])), "route_error:leaky"),
        (RoutingAgent(workers=[fine], router=LeakyRouter()), "router_error:ValueError"),
        (RoutingAgent(workers=[fine], router=ListRouter([route("fine")]), finalizer=LeakyFinalizer()), None),
    ],
    ids=["worker", "router", "finalizer"],
)
async def test_fault_text_stays_in_the_log(
    agent: RoutingAgent, stop_reason: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = await agent.arun("refund please")
    assert result.status == "stopped"
    if stop_reason is not None:
        assert result.stop_reason == stop_reason
    assert SECRET not in result.to_json()
    assert SECRET not in (result.message or "")
    assert "details in the log" in (result.message or "")
    assert SECRET in caplog.text  # the operator still sees what happened
