"""In-process scripted doubles: a chat model and a router that answer from a script and check it was used.

Both fail loudly: a call beyond the script raises :class:`ScriptExhaustedError` (and is remembered, so
:meth:`assert_consumed` fails even when the runtime turned the error into a stop reason), and
:meth:`assert_consumed` raises while steps are left.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.llm.protocol import ChatMessage
from routegate.llm.structured import ModelReply, OutputFormat

ChatStep: TypeAlias = str | ModelReply | BaseException | Callable[[Sequence[ChatMessage]], str | ModelReply]
"""A scripted chat answer: the text, a :class:`~routegate.llm.structured.ModelReply` (tool calls: for
``respond``), an exception to raise (e.g. ``LLMTimeoutError()``, ``LLMModeRefusedError(mode="tools")``), or a
function of the messages that returns the text or the reply."""

RouteStep: TypeAlias = object
"""A scripted router output: any raw value (dict, JSON text, garbage), a ready :class:`RouteDecision`, an
exception to raise, or a function of the :class:`RouteRequest` returning one of those."""


StepT = TypeVar("StepT")


class ScriptExhaustedError(AssertionError):
    """A scripted double was called more times than it was scripted for."""


@dataclass(frozen=True, slots=True)
class ChatCall:
    """One call a :class:`ScriptedChatModel` received."""

    messages: tuple[ChatMessage, ...]
    json_mode: bool
    temperature: float
    stream: bool
    output: OutputFormat | None = None
    """What ``respond`` asked for (tools or a JSON schema); ``None`` for ``complete`` and ``stream``."""

    def content(self, role: str) -> str | None:
        for message in reversed(self.messages):
            if message["role"] == role:
                return message["content"]
        return None


class _Scripted(Generic[StepT]):
    """What the scripted doubles share: their script (:meth:`script` adds to it, :attr:`remaining` counts what is
    left) and :meth:`assert_consumed`; a call beyond the script is remembered and raises."""

    def __init__(self, what: str, steps: Iterable[StepT]) -> None:
        self._what = what
        self._steps: deque[StepT] = deque(steps)
        self._failures: list[str] = []

    def script(self, *steps: StepT) -> None:
        self._steps.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self._steps)

    def assert_consumed(self) -> None:
        problems = list(self._failures)
        if self._steps:
            problems.append(f"{len(self._steps)} scripted step(s) never used: {list(self._steps)!r}")
        if problems:
            raise AssertionError(f"{self._what}: " + "; ".join(problems))

    def _next(self, calls: int) -> StepT:
        if not self._steps:
            message = f"{self._what} was called {calls} time(s) but only scripted for {calls - 1}"
            self._failures.append(message)
            raise ScriptExhaustedError(message)
        return self._steps.popleft()


class ScriptedChatModel(_Scripted[ChatStep]):
    """A :class:`~routegate.llm.structured.StructuredChatModel` that answers from a script, for fast unit tests.

    ``complete`` and ``stream`` take text steps; ``respond`` takes a text step (the reply's text) or a
    :class:`~routegate.llm.structured.ModelReply` (tool calls). Every call is kept in :attr:`calls`.
    """

    def __init__(self, steps: Iterable[ChatStep] = ()) -> None:
        super().__init__("ScriptedChatModel", steps)
        self.calls: list[ChatCall] = []

    def _step(self, call: ChatCall) -> str | ModelReply:
        self.calls.append(call)
        step: object = self._next(len(self.calls))
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            step = step(call.messages)
        if not isinstance(step, str | ModelReply):
            raise TypeError(f"a scripted chat step must give a str or a ModelReply, got {type(step).__name__}")
        return step

    def _answer(self, call: ChatCall) -> str:
        step = self._step(call)
        if not isinstance(step, str):
            raise TypeError(f"a scripted text answer must be a str, got {type(step).__name__} (respond takes those)")
        return step

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        return self._answer(ChatCall(tuple(messages), json_mode, temperature, stream=False))

    async def respond(
        self, messages: Sequence[ChatMessage], *, output: OutputFormat, temperature: float = 0.0
    ) -> ModelReply:
        step = self._step(ChatCall(tuple(messages), False, temperature, stream=False, output=output))
        return ModelReply(text=step) if isinstance(step, str) else step

    async def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        text = self._answer(ChatCall(tuple(messages), False, temperature, stream=True))
        words = text.split(" ")
        for index, word in enumerate(words):
            piece = word if index == len(words) - 1 else word + " "
            if piece:
                yield piece


class ScriptedRouter(_Scripted[RouteStep]):
    """A :class:`~routegate.core.protocols.Router` returning scripted raw outputs, for core tests.

    Each output is wrapped as ``RouteDecision(raw=output, decided_by=name)`` unless it already is a decision;
    the :class:`RouteRequest` of every call is kept in :attr:`requests`.
    """

    def __init__(self, outputs: Iterable[RouteStep] = (), *, name: str = "scripted") -> None:
        super().__init__("ScriptedRouter", outputs)
        self.name = name
        self.requests: list[RouteRequest] = []

    async def decide(self, request: RouteRequest) -> RouteDecision:
        self.requests.append(request)
        step = self._next(len(self.requests))
        if isinstance(step, BaseException):
            raise step
        if callable(step) and not isinstance(step, type):
            step = step(request)
        if isinstance(step, RouteDecision):
            return step
        return RouteDecision(raw=step, decided_by=self.name, why=f"scripted output #{len(self.requests)}")
