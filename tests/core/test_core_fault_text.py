"""A fault's text (an exception message that may hold a secret) never reaches the run's result; the log has it."""

from __future__ import annotations

import logging

import pytest

from core._scripted import ListRouter, route
from routegate.core import FinalizeRequest, RouteRequest, TicketArgs, worker
from routegate.plan import RoutingAgent

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


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            RoutingAgent(workers=[leaky], router=ListRouter([route("leaky")])),
            "worker 'leaky' raised RuntimeError (details in the log)",
        ),
        (RoutingAgent(workers=[fine], router=LeakyRouter()), "the router raised ValueError (details in the log)"),
        (
            RoutingAgent(workers=[fine], router=ListRouter([route("fine")]), finalizer=LeakyFinalizer()),
            "the finalizer raised KeyError (details in the log)",
        ),
    ],
    ids=["worker", "router", "finalizer"],
)
def test_one_fault_report_the_class_in_the_result_the_traceback_in_a_warning(
    agent: RoutingAgent, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = agent.run("refund please")
    assert result.message == message
    logged = [r for r in caplog.records if r.levelno == logging.WARNING and r.exc_info is not None]
    assert len(logged) == 1 and logged[0].getMessage() == message.removesuffix(" (details in the log)")
    assert logged[0].exc_info is not None and SECRET in str(logged[0].exc_info[1])


def test_no_runtime_writes_its_own_fault_report() -> None:
    from pathlib import Path

    import routegate

    src = Path(routegate.__file__).parent
    own = []
    for path in sorted(src.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "_faults.py" and ("details in the log" in text or "details are in the log" in text):
            own.append(str(path.relative_to(src)))
    assert own == [], "report a fault with routegate.core._faults.fault_message"
