"""A2A delegation over the in-process event bus, directly and through the dispatcher's policy boundary."""

from __future__ import annotations

import asyncio
import logging

import pytest

from routegate.errors import ConfigurationError
from routegate.technique import OutputKind, TechniqueDispatcher, TechniqueRouter
from routegate.technique.a2a import (
    A2ADelegator,
    A2AHandler,
    A2AOutcome,
    A2ATask,
    BusMessage,
    InProcessEventBus,
    serve_agent,
    task_topic,
)
from routegate.technique.types import A2ARoutingRequest

ROUTER = TechniqueRouter()


async def reviewer(task: A2ATask) -> dict[str, object]:
    return {"verdict": "approve", "pr": task.context.get("pr"), "sender": task.sender}


async def test_bus_delivers_to_every_subscriber_and_unsubscribes() -> None:
    bus = InProcessEventBus()
    seen: list[tuple[str, object]] = []

    async def first(message: BusMessage) -> None:
        seen.append(("first", message.payload["n"]))

    async def second(message: BusMessage) -> None:
        seen.append(("second", message.payload["n"]))

    stop_first = bus.subscribe("t", first)
    bus.subscribe("t", second)
    assert await bus.publish("t", {"n": 1}) == 2
    await bus.drain()
    stop_first()
    stop_first()  # idempotent
    assert await bus.publish("t", {"n": 2}) == 1
    assert await bus.publish("other", {"n": 3}) == 0
    await bus.drain()
    assert sorted(seen, key=str) == [("first", 1), ("second", 1), ("second", 2)]
    assert bus.subscribers("t") == 1
    await bus.aclose()
    assert bus.subscribers("t") == 0


async def test_a_failing_subscriber_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    bus = InProcessEventBus()

    async def broken(message: BusMessage) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe("t", broken)
    with caplog.at_level(logging.ERROR, logger="routegate.technique.a2a"):
        assert await bus.publish("t", {}) == 1
        await bus.drain()
    assert "bus handler for t failed" in caplog.text


async def test_delegation_completes_with_the_agents_answer() -> None:
    bus = InProcessEventBus()
    serve_agent(bus, "reviewer", reviewer)
    outcome = await A2ADelegator(bus, sender="planner").delegate(
        A2ARoutingRequest("reviewer", "Review PR 12", {"pr": 12})
    )
    assert (outcome.status, outcome.stop_reason) == ("completed", "success")
    assert outcome.result == {"verdict": "approve", "pr": 12, "sender": "planner"}
    assert bus.subscribers(f"a2a.reply.{outcome.task_id}") == 0  # the reply subscription is gone


async def test_nobody_listening_failures_and_timeouts() -> None:
    bus = InProcessEventBus()

    async def broken(task: A2ATask) -> str:
        raise ValueError("cannot review binary files")

    async def silent(task: A2ATask) -> str:
        await asyncio.Event().wait()
        return "never"

    serve_agent(bus, "broken", broken)
    serve_agent(bus, "silent", silent)
    delegator = A2ADelegator(bus, reply_timeout=0.05)
    missing = await delegator.delegate(A2ARoutingRequest("nobody", "x"))
    assert (missing.status, missing.stop_reason) == ("unavailable", "a2a_unavailable:nobody")
    failed = await delegator.delegate(A2ARoutingRequest("broken", "x"))
    assert (failed.status, failed.stop_reason) == ("failed", "a2a_failed:broken")
    assert (
        failed.message == "agent 'broken' raised ValueError (details in the log)"
    )  # the exception's text stays in the log
    late = await delegator.delegate(A2ARoutingRequest("silent", "x"))
    assert (late.status, late.stop_reason) == ("timeout", "a2a_timeout:silent")
    await bus.aclose()


async def test_fire_and_forget() -> None:
    bus = InProcessEventBus()
    received: list[A2ATask] = []

    async def record(task: A2ATask) -> None:
        received.append(task)

    serve_agent(bus, "indexer", record)
    outcome = await A2ADelegator(bus, wait_for_reply=False).delegate(A2ARoutingRequest("indexer", "Reindex docs"))
    assert (outcome.status, outcome.stop_reason) == ("submitted", "success")
    await bus.drain()
    assert [(task.target_agent, task.task_description, task.reply_to) for task in received] == [
        ("indexer", "Reindex docs", "")
    ]


async def test_malformed_tasks_on_the_bus_are_ignored() -> None:
    bus = InProcessEventBus()
    calls: list[A2ATask] = []

    async def record(task: A2ATask) -> None:
        calls.append(task)

    serve_agent(bus, "x", record)
    await bus.publish(task_topic("x"), {"id": "1", "target_agent": "x"})  # no task_description
    await bus.drain()
    assert calls == []


async def test_dispatch_a2a_through_the_policy() -> None:
    bus = InProcessEventBus()
    serve_agent(bus, "reviewer", reviewer)
    dispatcher = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:reviewer"])
    text = 'Needs review.\n```a2a\n{"target_agent": "reviewer", "task": "Review PR 7", "context": {"pr": 7}}\n```'
    result = await dispatcher.adispatch(ROUTER.classify(text))
    assert (result.kind, result.stop_reason) == (OutputKind.A2A_REQUEST, "success")
    outcome = result.output[0].value
    assert isinstance(outcome, A2AOutcome)
    assert outcome.result == {"verdict": "approve", "pr": 7, "sender": "routegate"}
    refused = await dispatcher.adispatch(
        ROUTER.classify('<a2a_request>{"target_agent": "deployer", "task": "ship it"}</a2a_request>')
    )
    assert refused.stop_reason == "invalid_route:route_not_allowed:a2a:deployer"
    nobody = TechniqueDispatcher(handlers=[A2AHandler(A2ADelegator(bus))], allow=["a2a:qa"])
    result = await nobody.adispatch(ROUTER.classify('```a2a\n{"to": "qa", "task": "run the suite"}\n```'))
    assert (result.stop_reason, result.phase) == ("a2a_unavailable:qa", "delegate")
    await bus.aclose()


def test_delegator_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="publish"):
        A2ADelegator(object())  # type: ignore[arg-type]  # misuse on purpose
    with pytest.raises(ConfigurationError, match="reply_timeout"):
        A2ADelegator(InProcessEventBus(), reply_timeout=0)
