"""A2A delegation over an event bus: the bus protocol, an in-process bus, agents that serve tasks, the handler.

The protocol on the bus is two topics: a delegation is published on ``a2a.task.<agent>`` as an
:class:`A2ATask`; the agent answers on the task's ``reply_to`` topic (``a2a.reply.<task id>``) with
``{"task_id", "agent", "status": "completed" | "failed", "result" | "error"}``. :class:`A2ADelegator` publishes and,
unless told not to wait, waits for the reply: nobody subscribed ends with ``a2a_unavailable:<agent>``, no reply
in time with ``a2a_timeout:<agent>``, a failed task with ``a2a_failed:<agent>``.

:class:`EventBus` is the seam for a real broker (Redis streams, NATS, Kafka...): two methods.
:class:`InProcessEventBus` delivers each message to every subscriber of its topic in a task of its own.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from routegate.core._bounds import check_bounds
from routegate.core._faults import fault_message
from routegate.core._fields import fields_dict
from routegate.core.contracts import ArgLimits, jsonable
from routegate.core.outcome import HasStopReason
from routegate.core.stop_reasons import SUCCESS, invalid_route
from routegate.core.workers import Worker, WorkerArgs
from routegate.errors import ConfigurationError
from routegate.technique import stop_reasons as tsr
from routegate.technique._shapes import MAX_TASK_CHARS
from routegate.technique.types import A2ARoutingRequest, OutputKind, TechniqueItem

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BusMessage:
    """One message on the bus: its topic, a JSON-ready payload and a unique id."""

    topic: str
    payload: Mapping[str, Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


BusHandler = Callable[[BusMessage], Awaitable[None]]


@runtime_checkable
class EventBus(Protocol):
    """Publish/subscribe by topic. ``publish`` returns how many subscribers the message was handed to."""

    async def publish(self, topic: str, payload: Mapping[str, Any]) -> int: ...

    def subscribe(self, topic: str, handler: BusHandler) -> Callable[[], None]:
        """Register ``handler`` for ``topic``; the returned callable unsubscribes it."""
        ...


class InProcessEventBus:
    """An :class:`EventBus` inside one event loop: each delivery runs in its own task; a failing handler is
    logged and does not affect the publisher or the other subscribers."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[BusHandler]] = {}
        self._pending: set[asyncio.Task[None]] = set()

    async def publish(self, topic: str, payload: Mapping[str, Any]) -> int:
        handlers = list(self._handlers.get(topic, ()))
        message = BusMessage(topic, jsonable(payload))
        for handler in handlers:
            task = asyncio.create_task(self._deliver(handler, message))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
        return len(handlers)

    @staticmethod
    async def _deliver(handler: BusHandler, message: BusMessage) -> None:
        try:
            await handler(message)
        except Exception:
            logger.exception("bus handler for %s failed", message.topic)

    def subscribe(self, topic: str, handler: BusHandler) -> Callable[[], None]:
        self._handlers.setdefault(topic, []).append(handler)

        def unsubscribe() -> None:
            handlers = self._handlers.get(topic, [])
            if handler in handlers:
                handlers.remove(handler)
            if not handlers:
                self._handlers.pop(topic, None)

        return unsubscribe

    def subscribers(self, topic: str) -> int:
        return len(self._handlers.get(topic, ()))

    async def drain(self) -> None:
        """Wait until every delivery in flight (and any it triggers) has finished."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the deliveries in flight and drop every subscription."""
        for task in list(self._pending):
            task.cancel()
        await asyncio.gather(*list(self._pending), return_exceptions=True)
        self._handlers.clear()


def task_topic(agent: str) -> str:
    return f"a2a.task.{agent}"


def reply_topic(task_id: str) -> str:
    return f"a2a.reply.{task_id}"


class A2ATask(BaseModel):
    """A delegated task as it travels on the bus (a pydantic model: it is untrusted when it arrives)."""

    id: Annotated[str, Field(min_length=1, max_length=64)]
    target_agent: Annotated[str, Field(min_length=1, max_length=128)]
    task_description: Annotated[str, Field(min_length=1, max_length=MAX_TASK_CHARS)]
    context: dict[str, Any] = Field(default_factory=dict)
    sender: str = "routegate"
    reply_to: str = ""


A2AStatus = Literal["submitted", "completed", "failed", "unavailable", "timeout"]


_NO_MESSAGE = frozenset({"message"})


@dataclass(frozen=True, slots=True)
class A2AOutcome(HasStopReason):
    """How a delegation ended; ``result`` is the agent's answer when it completed."""

    task_id: str
    target_agent: str
    status: A2AStatus
    stop_reason: str
    result: object = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields, ``result`` JSON-safe, ``message`` only when there is one."""
        out = fields_dict(self, leave_out=_NO_MESSAGE if not self.message else frozenset())
        return out | {"result": jsonable(self.result)}


AgentFn = Callable[[A2ATask], Awaitable[object]]


def serve_agent(bus: EventBus, name: str, fn: AgentFn, *, limits: ArgLimits | None = None) -> Callable[[], None]:
    """Serve ``name`` on the bus: each task goes to ``fn``; its return value (or error) is the reply.

    A task over ``limits`` (:class:`~routegate.core.ArgLimits`, default bounds) or of the wrong shape is logged
    and ignored. When ``fn`` raises, the reply says ``failed`` with the exception's class only; the exception
    itself goes to the log (logger ``routegate.technique.a2a``), never onto the bus.
    """
    bounds = limits or ArgLimits()

    async def on_task(message: BusMessage) -> None:
        breach = check_bounds(message.payload, bounds, json_only=True)
        if breach is not None:
            logger.warning("agent %s ignored a task over its limits: %s", name, breach.message)
            return
        try:
            task = A2ATask.model_validate(message.payload)
        except ValidationError as exc:
            logger.warning("agent %s ignored a malformed task: %s", name, exc.errors(include_url=False)[:1])
            return
        reply: dict[str, Any] = {"task_id": task.id, "agent": name}
        try:
            reply |= {"status": "completed", "result": jsonable(await fn(task))}
        except Exception as exc:
            reply |= {
                "status": "failed",
                "error": fault_message(exc, f"agent {name!r}", logger, where=f" on task {task.id}"),
            }
        if task.reply_to:
            await bus.publish(task.reply_to, reply)

    return bus.subscribe(task_topic(name), on_task)


class A2ADelegator:
    """Submits :class:`A2ARoutingRequest` values as tasks on a bus and (by default) waits for the reply."""

    def __init__(
        self,
        bus: EventBus,
        *,
        sender: str = "routegate",
        reply_timeout: float = 30.0,
        wait_for_reply: bool = True,
        limits: ArgLimits | None = None,
    ) -> None:
        if not isinstance(bus, EventBus):
            raise ConfigurationError(f"bus must have publish() and subscribe(), got {type(bus).__name__}")
        if not 0 < reply_timeout < 86_400:
            raise ConfigurationError(f"reply_timeout must be in (0, 86400) seconds, got {reply_timeout!r}")
        self.bus = bus
        self.sender = sender
        self.reply_timeout = reply_timeout
        self.wait_for_reply = wait_for_reply
        self.limits = limits or ArgLimits()

    async def delegate(self, request: A2ARoutingRequest) -> A2AOutcome:
        """Publish the task and wait for the reply. A context over :attr:`limits` is not sent:
        ``invalid_route:too_deep`` / ``invalid_route:too_large`` / ``invalid_route:bad_args``."""
        agent = request.target_agent
        task_id = uuid.uuid4().hex
        breach = check_bounds({"context": request.context}, self.limits, json_only=True)
        if breach is not None:
            return A2AOutcome(task_id, agent, "failed", invalid_route(breach.detail), message=breach.message)
        task = A2ATask(
            id=task_id,
            target_agent=agent,
            task_description=request.task_description,
            context=dict(request.context),
            sender=self.sender,
            reply_to=reply_topic(task_id) if self.wait_for_reply else "",
        )
        replies: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()

        async def on_reply(message: BusMessage) -> None:
            if not replies.done():
                replies.set_result(message.payload)

        unsubscribe = self.bus.subscribe(task.reply_to, on_reply) if self.wait_for_reply else None
        try:
            delivered = await self.bus.publish(task_topic(agent), task.model_dump(mode="json"))
            if delivered == 0:
                message = f"no agent named {agent!r} is listening on the bus"
                return A2AOutcome(task_id, agent, "unavailable", tsr.a2a_unavailable(agent), message=message)
            if not self.wait_for_reply:
                return A2AOutcome(task_id, agent, "submitted", SUCCESS)
            try:
                reply = await asyncio.wait_for(replies, self.reply_timeout)
            except TimeoutError:
                message = f"no reply from {agent!r} within reply_timeout={self.reply_timeout}s"
                return A2AOutcome(task_id, agent, "timeout", tsr.a2a_timeout(agent), message=message)
        finally:
            if unsubscribe is not None:
                unsubscribe()
        if reply.get("status") == "completed":
            return A2AOutcome(task_id, agent, "completed", SUCCESS, reply.get("result"))
        error = str(reply.get("error") or f"unexpected reply status {reply.get('status')!r}")[:500]
        return A2AOutcome(task_id, agent, "failed", tsr.a2a_failed(agent), message=error)


class A2AArgs(WorkerArgs):
    """Arguments of an ``a2a:<agent>`` target."""

    task_description: Annotated[str, Field(min_length=1, max_length=MAX_TASK_CHARS, pattern=r"\S")]
    context: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class A2AHandler:
    """Routes A2A requests to ``a2a:<agent>`` targets delegated through an :class:`A2ADelegator`."""

    delegator: A2ADelegator
    kind: OutputKind = field(default=OutputKind.A2A_REQUEST, init=False)
    prefix: str = field(default="a2a", init=False)

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        if not isinstance(item, A2ARoutingRequest):
            raise ConfigurationError(f"A2AHandler got a {type(item).__name__}, not an A2ARoutingRequest")
        return f"a2a:{item.target_agent}", {"task_description": item.task_description, "context": dict(item.context)}

    def schema(self, target: str) -> type[BaseModel] | None:
        return A2AArgs

    def worker(self, target: str) -> Worker | None:
        agent = target.partition(":")[2]
        if not agent:
            return None
        delegator = self.delegator

        async def delegate(task_description: str, context: dict[str, Any]) -> A2AOutcome:
            return await delegator.delegate(A2ARoutingRequest(agent, task_description, context))

        return Worker(name=target, fn=delegate, description=f"Delegate a task to agent {agent}", args_model=A2AArgs)


__all__ = [
    "A2AArgs",
    "A2ADelegator",
    "A2AHandler",
    "A2AOutcome",
    "A2ATask",
    "BusHandler",
    "BusMessage",
    "EventBus",
    "InProcessEventBus",
    "reply_topic",
    "serve_agent",
    "task_topic",
]
