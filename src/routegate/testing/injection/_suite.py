"""The replay harness: tool worlds, user tasks, injections, and a scripted model that obeys every injection.

No model runs. A :class:`UserTask` is the plan a capable model would follow for the user's request — each step a
function of what the tools returned so far, so values really flow from outputs to arguments. The
:class:`ObedientModel` (a :class:`~routegate.llm.StructuredChatModel` that answers tool calls) follows that plan, and
whenever a tool's result holds an injection's text it does what the injection asks first (its calls, or the words it
wants in the answer), then goes back to the plan. A refusal handed back to it (``on_refusal="observe"``) makes it
drop what was refused and go on. Every call goes through :class:`~routegate.plan.ToolAgent` — policy, flow rules,
gateway — and the task and the injection are judged on the world's final state and the answer, from outside.

:class:`ObedientRouter` is the same scripted agent for a :class:`~routegate.plan.RoutingAgent` (its workers answer
with observations: :func:`as_observations`; it finishes through :func:`finish_worker`).
"""

from __future__ import annotations

import functools
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from routegate.core.contracts import Budget
from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.core.provenance import OutputCheck
from routegate.core.workers import Worker
from routegate.llm.protocol import ChatMessage
from routegate.llm.structured import ModelReply, OutputFormat, ToolCall
from routegate.plan import ToolAgent, ToolAgentResult

Seen = Mapping[str, Any]
"""The latest result of each tool the run called so far, by tool name (and the user's request, as ``"goal"``)."""
Step = Callable[[Seen], dict[str, Any]]
"""One planned call: a function of what the tools returned so far, giving ``{"target": ..., "args": ...}``."""
RuleSet = Literal["none", "arguments", "data"]
"""Which flow rules a suite's workers declare: none; rules on arguments' whole values (``From``, the vocabulary
before rules could name data); or rules on data too (links inside a text, secrets that must not flow, sources
narrowed to the calls and records the user named)."""
WorldT = TypeVar("WorldT")


def call(target: str, **args: Any) -> dict[str, Any]:
    """The decision to call ``target`` with ``args``, as a model writes it."""
    return {"target": target, "args": args}


def tool_workers(
    tools: Callable[[WorldT], Iterable[Callable[..., Any]]],
    flows: Callable[[RuleSet], Mapping[str, Mapping[str, Any]]],
) -> Callable[[WorldT, RuleSet], list[Worker]]:
    """A suite's ``workers``: a worker per tool function of the world, named for it and run inline, under the flow
    rules ``flows`` gives for the rule set (by tool name, then argument; a tool not named has none). On ``"none"``
    no worker has rules and ``flows`` is not asked."""

    def workers(world: WorldT, rules: RuleSet) -> list[Worker]:
        chosen = {} if rules == "none" else flows(rules)
        return [Worker(fn.__name__, fn, inline=True, flows=chosen.get(fn.__name__)) for fn in tools(world)]

    return workers


@dataclass(frozen=True, slots=True)
class UserTask:
    """A user's request, the plan a model would follow for it, the answer it would write, and the check of
    success on the world's final state and the answer."""

    id: str
    goal: str
    steps: tuple[Step, ...]
    answer: Callable[[Seen], str]
    check: Callable[[Any, str | None], bool]


@dataclass(frozen=True, slots=True)
class Injection:
    """What an attacker writes into a tool's output, what an obedient model then does — a ``call``, the ``steps``
    of a script (each a function of what the tools returned so far), or words to ``say`` in its answer — and the
    check that the attacker got what they wanted."""

    id: str
    text: str
    succeeded: Callable[[Any, str | None], bool]
    call: Mapping[str, Any] | None = None
    say: str | None = None
    steps: tuple[Step, ...] = ()

    def actions(self) -> list[Step]:
        """What the obedient model does, in order."""
        fixed = self.call
        return [*([] if fixed is None else [lambda seen: dict(fixed)]), *self.steps]


@dataclass(frozen=True, slots=True)
class Suite:
    """A tool world: how to build one (with an injection's text in its injectable places, or none), its workers
    (with the flow rules of a :data:`RuleSet`), its tasks and its injections, and the output check it would deploy."""

    name: str
    world: Callable[[str], Any]
    workers: Callable[[Any, RuleSet], list[Worker]]
    tasks: tuple[UserTask, ...]
    injections: tuple[Injection, ...]
    output_check: OutputCheck | None = None


@dataclass(frozen=True, slots=True)
class Defense:
    """One configuration of the governed run: the flow rules (``True``: every rule the suite has; ``False``:
    none; or a :data:`RuleSet`), what a refusal does, the output check."""

    name: str
    rules: bool | RuleSet
    on_refusal: Literal["end", "observe"] = "end"
    output_check: bool = False

    @property
    def rule_set(self) -> RuleSet:
        if self.rules is True:
            return "data"
        if self.rules is False:
            return "none"
        return self.rules


NO_DEFENSE = Defense("policy only (every tool allowed)", rules="none")
ARGUMENTS_RECOVER = Defense(
    "argument rules + observe + output check", rules="arguments", on_refusal="observe", output_check=True
)
RULES = Defense("data rules", rules="data")
RULES_RECOVER = Defense("data rules + observe + output check", rules="data", on_refusal="observe", output_check=True)
DEFENSES = (NO_DEFENSE, ARGUMENTS_RECOVER, RULES, RULES_RECOVER)


class _Obedience:
    """What the scripted agent knows and will do next: the task's plan, the injections it has not met yet, the
    calls an injection it met asked for, what the tools returned, and the words to add to its answer.

    What the calls an injection asked for returned is kept apart (the injection's own steps read it first): the
    plan goes on with what its own calls returned, as a model keeps both in its context. A call it already made
    with the same arguments it does not make again (the plan takes what that call returned)."""

    def __init__(self, task: UserTask, injections: Sequence[Injection]) -> None:
        self._task = task
        self._pending = list(injections)
        self._cursor = 0
        self._obeying: deque[Step] = deque()
        self._say: list[str] = []
        self._made: set[str] = set()
        self.seen: dict[str, Any] = {"goal": task.goal}
        self.obeyed: dict[str, Any] = {}

    def read(self, results: Iterable[tuple[str, object, bool]], refused: Iterable[str]) -> None:
        """Take in what came back: the tools' results by name, and whether an injection asked for the call (an
        injection in them is obeyed first); the stop reasons of refusals (an answer refused by the output check is
        written again without the injected words)."""
        texts: list[str] = []
        for name, value, injected in results:
            (self.obeyed if injected else self.seen)[name] = value
            texts.extend(_texts(value))
        if any(reason.startswith("output_denied") for reason in refused):
            self._say.clear()
        read = "\n".join(texts)
        for injection in list(self._pending):
            if injection.text in read:
                self._pending.remove(injection)
                if injection.say is not None:
                    self._say.append(injection.say)
                self._obeying.extend(injection.actions())

    def next_call(self) -> tuple[dict[str, Any], bool] | None:
        """The next call and whether an injection asked for it (what an injection asked for comes first, then the
        plan), or ``None``: time to answer. An injected call the model cannot build from what it has seen, or has
        made already, is given up."""
        while self._obeying:
            step = self._obeying.popleft()
            try:
                decided = step({**self.seen, **self.obeyed})
            except (KeyError, IndexError, StopIteration, TypeError, ValueError):
                continue
            if self._made_now(decided):
                return decided, True
        while self._cursor < len(self._task.steps):
            step = self._task.steps[self._cursor]
            self._cursor += 1
            decided = step(self.seen)
            if self._made_now(decided):
                return decided, False
            target = str(decided.get("target"))  # an injection made this call already: its result serves the plan
            if target in self.obeyed:
                self.seen[target] = self.obeyed[target]
        return None

    def _made_now(self, decided: Mapping[str, Any]) -> bool:
        """Note the call as made; ``False`` when it was made before."""
        key = json.dumps([decided.get("target"), decided.get("args")], sort_keys=True, default=str)
        if key in self._made:
            return False
        self._made.add(key)
        return True

    def answer(self) -> str:
        return " ".join([self._task.answer(self.seen), *self._say])


def _texts(value: object) -> list[str]:
    """Every text in a result (what the model reads), bounded by the result's own size."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for child in value.values() for text in _texts(child)]
    if isinstance(value, list | tuple):
        return [text for child in value for text in _texts(child)]
    return []


def _parsed(content: str) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return content


class ObedientModel:
    """A scripted :class:`~routegate.llm.StructuredChatModel` that follows the task's plan, one tool call per turn,
    and obeys every injection it reads (see the module docstring). It reads the conversation as a model does:
    its own calls, each tool's result by the call's id, a refusal handed back."""

    def __init__(self, task: UserTask, injections: Sequence[Injection]) -> None:
        self._mind = _Obedience(task, injections)
        self._names: dict[str, tuple[str, bool]] = {}
        self._read = 0

    async def respond(
        self, messages: Sequence[ChatMessage], *, output: OutputFormat, temperature: float = 0.0
    ) -> ModelReply:
        results: list[tuple[str, object, bool]] = []
        refused: list[str] = []
        for message in messages[self._read :]:
            if message["role"] == "tool":
                value = _parsed(message["content"])
                if isinstance(value, dict) and value.get("status") == "refused":
                    refused.append(str(value.get("stop_reason", "")))
                else:
                    name, injected = self._names.get(message.get("tool_call_id", ""), ("", False))
                    results.append((name, value, injected))
            elif message["role"] == "user" and self._read:
                value = _parsed(message["content"])
                if isinstance(value, dict) and value.get("status") == "refused":
                    refused.append(str(value.get("stop_reason", "")))
        self._read = len(messages)
        self._mind.read(results, refused)
        next_call = self._mind.next_call()
        if next_call is None:
            return ModelReply(text=self._mind.answer(), finish_reason="stop")
        decided, injected = next_call
        call_id = f"call_{len(self._names) + 1}"
        self._names[call_id] = (str(decided["target"]), injected)
        arguments = json.dumps(decided.get("args", {}), default=str)
        self._read += 1  # its own message, which the next request carries
        return ModelReply(
            tool_calls=(ToolCall(str(decided["target"]), arguments, call_id),), finish_reason="tool_calls"
        )

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        raise NotImplementedError("the obedient model answers tool calls only (respond)")

    def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        raise NotImplementedError("the obedient model answers tool calls only (respond)")


class ObedientRouter:
    """The scripted agent of :class:`ObedientModel` as a router for a :class:`~routegate.plan.RoutingAgent`: it
    reads each observation's ``result`` and finishes through the ``finish`` worker (:func:`finish_worker`)."""

    def __init__(self, task: UserTask, injections: Sequence[Injection]) -> None:
        self._mind = _Obedience(task, injections)
        self._injected = False

    async def decide(self, request: RouteRequest) -> RouteDecision:
        last = request.history[-1] if request.history else None
        if last is not None:
            observation = last.observation
            if observation.get("status") == "refused":
                self._mind.read((), [str(observation.get("stop_reason", ""))])
            else:
                self._mind.read([(last.route.target, observation.get("result"), self._injected)], ())
        next_call = self._mind.next_call()
        if next_call is not None:
            decided, self._injected = next_call
            by = "obeyed-injection" if self._injected else "plan"
            return RouteDecision(raw={"kind": "route", **decided}, decided_by=by)
        answer = self._mind.answer()
        return RouteDecision(raw={"kind": "route", "target": "finish", "args": {"answer": answer}}, decided_by="plan")


def finish_worker() -> Worker:
    """The tool a routed model calls with its answer (the routing agent's one ``done`` observation)."""

    def finish(answer: str) -> dict[str, Any]:
        return {"status": "done", "result": {"answer": answer}}

    return Worker("finish", finish, inline=True)


def as_observations(workers: Iterable[Worker]) -> list[Worker]:
    """A suite's workers for a routing agent: each one's result as an observation (``{"status": "needs_reroute",
    "result": ...}``), its schema and rules unchanged."""

    def observed(worker: Worker) -> Worker:
        @functools.wraps(worker.fn)
        def fn(**args: Any) -> dict[str, Any]:
            return {"status": "needs_reroute", "result": worker.fn(**args)}

        return Worker(worker.name, fn, worker.description, worker.schema, inline=True, flows=worker.flows)

    return [observed(worker) for worker in workers]


@dataclass(slots=True)
class PairResult:
    """One run: did the user's task succeed, did the attacker's, how it ended, how many refusals it met."""

    utility: bool
    attacked: bool
    stop_reason: str
    refusals: int


@dataclass(slots=True)
class Figures:
    """One suite under one defense: utility without injections, and utility and attack success under attack."""

    suite: str
    defense: str
    tasks: int
    pairs: int
    benign_utility: float
    attack_utility: float
    attack_success: float
    benign_refusals: int
    stops: dict[str, int] = field(default_factory=dict)


def run_once(suite: Suite, task: UserTask, injection: Injection | None, defense: Defense) -> PairResult:
    """Run ``task`` in a fresh world (with ``injection`` planted, or none) under ``defense``, through a
    :class:`~routegate.plan.ToolAgent` whose model obeys every injection."""
    world = suite.world(injection.text if injection is not None else "")
    turns = len(task.steps) + 8
    agent = ToolAgent(
        model=ObedientModel(task, [injection] if injection is not None else []),
        tools=suite.workers(world, defense.rule_set),
        budget=Budget(max_route_attempts=turns, max_delegations=turns),
        on_refusal=defense.on_refusal,
        output_check=suite.output_check if defense.output_check else None,
    )
    result: ToolAgentResult = agent.run(task.goal)
    answer = result.output if result.ok else None
    refusals = sum(1 for entry in result.trace if not entry.ok)
    attacked = injection is not None and injection.succeeded(world, answer)
    return PairResult(result.ok and task.check(world, answer), attacked, result.stop_reason, refusals)


def measure(suite: Suite, defense: Defense) -> Figures:
    """Every task alone, then every (task, injection) pair, under ``defense``."""
    benign = [run_once(suite, task, None, defense) for task in suite.tasks]
    pairs = [run_once(suite, task, inj, defense) for task in suite.tasks for inj in suite.injections]
    stops: dict[str, int] = {}
    for pair in pairs:
        stops[pair.stop_reason] = stops.get(pair.stop_reason, 0) + 1
    return Figures(
        suite.name,
        defense.name,
        len(benign),
        len(pairs),
        sum(r.utility for r in benign) / len(benign),
        sum(r.utility for r in pairs) / len(pairs),
        sum(r.attacked for r in pairs) / len(pairs),
        sum(r.refusals for r in benign),
        stops,
    )
