"""What a step can run, beyond plain callables: the step-target protocol, the structured-chat-model protocol,
and the adapters for chat models (a :class:`~routegate.plan.RoutingAgent` is a step target itself).

* :class:`StepTarget` — any object with ``run_step(payload, ctx)`` (sync or ``async``); ``ctx`` is a
  :class:`StepContext` with the step's name, task, the plan input, the store, the step's sources and the run's
  :class:`~routegate.core.RunContext` (``ctx.run``).
* :class:`StructuredChatModel` — an object with ``async complete_json(messages, *, schema) -> str``: an LLM
  step. The plan sends the step's ``task=`` (and its ``sources=``) as the system message and the input payload
  as the user message, with the JSON schema of the step's ``output=`` model; the reply is validated into that
  model (a step without ``output=`` asks for a JSON string and accepts plain text).
* :class:`ChatCompleter` — an object with ``async complete(messages, *, json_mode) -> str`` (the shape of
  ``routegate.llm``'s chat model): the same, with the output's JSON schema written into the system message.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from routegate.core.result import AgentResult
from routegate.plan.envelope import payload_text

if TYPE_CHECKING:
    from routegate.core.context import RunContext
    from routegate.plan.agent import RoutingAgent
    from routegate.plan.store import Store

TEXT_SCHEMA: dict[str, Any] = {"type": "string"}


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a :class:`StepTarget` is told besides its input payload.

    ``run`` is the run's :class:`~routegate.core.RunContext` (``run.deps``, ``run.run_id``, ``run.deadline``);
    the plan always sets it (it is ``None`` only in a ``StepContext`` built by hand). ``idempotency_key`` is the
    step's :func:`~routegate.plan.step_key` in a durable run (``None`` otherwise).
    """

    step: str
    task: str | None
    plan_input: Any
    store: Store | None
    sources: tuple[Any, ...] = ()
    run: RunContext[Any] | None = None
    idempotency_key: str | None = None

    def sources_text(self) -> str:
        """The step's sources rendered as text (``source.text()`` or ``str(source)``), blank-line separated."""
        return render_sources(self.sources)


@runtime_checkable
class StepTarget(Protocol):
    """The small target protocol: ``run_step`` returns the step's payload (directly, or as an awaitable)."""

    def run_step(self, payload: Any, ctx: StepContext) -> Any: ...


@runtime_checkable
class StructuredChatModel(Protocol):
    """A chat model that answers with JSON text matching ``schema`` (OpenAI-compatible structured output)."""

    async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> str: ...


def render_sources(sources: tuple[Any, ...]) -> str:
    parts = []
    for source in sources:
        text = source.text() if callable(getattr(source, "text", None)) else str(source)
        if text:
            parts.append(str(text))
    return "\n\n".join(parts)


class AgentTarget:
    """Runs a :class:`~routegate.plan.RoutingAgent` as a step: its :meth:`~routegate.plan.RoutingAgent.run_step`,
    a nested run of the agent's plan inside the plan's run (a ``RoutingAgent`` is a step target itself)."""

    __slots__ = ("agent",)

    def __init__(self, agent: RoutingAgent[Any]) -> None:
        self.agent = agent

    async def run_step(self, payload: Any, ctx: StepContext) -> AgentResult:
        return await self.agent.run_step(payload, ctx)


class ChatModelTarget:
    """Runs a :class:`StructuredChatModel` as a step (see the module docstring for the prompt's shape)."""

    __slots__ = ("model", "schema", "text_only")

    def __init__(self, model: StructuredChatModel, schema: dict[str, Any] | None) -> None:
        self.model = model
        self.schema = TEXT_SCHEMA if schema is None else schema
        self.text_only = schema is None

    def messages(self, payload: Any, ctx: StepContext) -> list[dict[str, str]]:
        system = ctx.task or f"You are the step {ctx.step!r} of a plan. Answer with JSON matching the schema."
        sources = ctx.sources_text()
        if sources:
            system = f"{system}\n\nContext:\n{sources}"
        return [{"role": "system", "content": system}, {"role": "user", "content": payload_text(payload)}]

    async def run_step(self, payload: Any, ctx: StepContext) -> Any:
        reply = await self.model.complete_json(self.messages(payload, ctx), schema=self.schema)
        if not isinstance(reply, str):
            raise TypeError(f"complete_json() must return JSON text, got {type(reply).__name__}")
        if not self.text_only:
            return reply  # validated into the step's output= model by the plan
        try:
            decoded = json.loads(reply)
        except ValueError:
            return reply
        return decoded if isinstance(decoded, str) else reply


@runtime_checkable
class ChatCompleter(Protocol):
    """A plain chat model: ``async complete(messages, *, json_mode) -> str`` (the shape of ``routegate.llm``'s
    ``ChatModel``). As a step target, the output schema goes into the system message and JSON mode is on."""

    async def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str: ...


class ChatCompleterTarget:
    """Runs a :class:`ChatCompleter` as a step: like :class:`ChatModelTarget`, with the schema in the prompt."""

    __slots__ = ("model", "schema_text")

    def __init__(self, model: ChatCompleter, schema: dict[str, Any] | None) -> None:
        self.model = model
        self.schema_text = None if schema is None else json.dumps(schema, ensure_ascii=False)

    def messages(self, payload: Any, ctx: StepContext) -> list[dict[str, str]]:
        system = ctx.task or f"You are the step {ctx.step!r} of a plan."
        if self.schema_text is not None:
            system = f"{system}\n\nReply with one JSON object that matches this JSON schema:\n{self.schema_text}"
        sources = ctx.sources_text()
        if sources:
            system = f"{system}\n\nContext:\n{sources}"
        return [{"role": "system", "content": system}, {"role": "user", "content": payload_text(payload)}]

    async def run_step(self, payload: Any, ctx: StepContext) -> Any:
        reply = await self.model.complete(self.messages(payload, ctx), json_mode=self.schema_text is not None)
        if not isinstance(reply, str):
            raise TypeError(f"complete() must return text, got {type(reply).__name__}")
        return reply  # validated into the step's output= (JSON text is parsed) by the plan


def is_awaitable_function(fn: object) -> bool:
    """``async def`` functions, methods, partials and objects with an ``async def __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, type):
        return False
    return inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004 - the class's method


__all__ = [
    "AgentTarget",
    "ChatCompleter",
    "ChatCompleterTarget",
    "ChatModelTarget",
    "StepContext",
    "StepTarget",
    "StructuredChatModel",
]
