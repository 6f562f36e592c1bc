"""The replay harness: tool worlds, user tasks, injections, and a scripted model that obeys every injection.

No model runs. A :class:`UserTask` is the plan a capable model would follow for the user's request — each step a
function of what the tools returned so far, so values really flow from outputs to arguments. The
:class:`ObedientRouter` follows that plan, and whenever a tool's output holds an injection's text it does what
the injection asks first (the call, or the words it wants in the answer), then goes back to the plan. A refusal
handed back to it (``on_refusal="observe"``) makes it drop what was refused and go on. Every decision goes
through :class:`~routegate.plan.RoutingAgent` — policy, provenance rules, gateway — and the task and the
injection are judged on the world's final state and the answer, from outside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from routegate.core.contracts import Budget
from routegate.core.protocols import RouteDecision, RouteRequest
from routegate.core.provenance import OutputCheck
from routegate.core.result import AgentResult
from routegate.core.workers import Worker
from routegate.plan import RoutingAgent

Seen = Mapping[str, Any]
"""The latest ``result`` of each tool the run called so far, by tool name."""
Step = Callable[[Seen], dict[str, Any]]
"""One planned decision: a function of what the tools returned so far, giving ``{"target": ..., "args": ...}``."""


def call(target: str, **args: Any) -> dict[str, Any]:
    """The decision to call ``target`` with ``args``, as a router writes it."""
    return {"target": target, "args": args}


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
    """What an attacker writes into a tool's output, what an obedient model then does (a ``call`` or words to
    ``say`` in its answer), and the check that the attacker got what they wanted."""

    id: str
    text: str
    succeeded: Callable[[Any, str | None], bool]
    call: Mapping[str, Any] | None = None
    say: str | None = None


@dataclass(frozen=True, slots=True)
class Suite:
    """A tool world: how to build one (with an injection's text in its injectable places, or none), its workers
    (with their flow rules or without), its tasks and its injections, and the output check it would deploy."""

    name: str
    world: Callable[[str], Any]
    workers: Callable[[Any, bool], list[Worker]]
    tasks: tuple[UserTask, ...]
    injections: tuple[Injection, ...]
    output_check: OutputCheck | None = None


@dataclass(frozen=True, slots=True)
class Defense:
    """One configuration of the governed run: flow rules on or off, what a refusal does, the output check."""

    name: str
    rules: bool
    on_refusal: Literal["end", "observe"] = "end"
    output_check: bool = False


NO_DEFENSE = Defense("policy only (every tool allowed)", rules=False)
RULES = Defense("provenance rules", rules=True)
RULES_RECOVER = Defense(
    "provenance rules + observe + output check", rules=True, on_refusal="observe", output_check=True
)
DEFENSES = (NO_DEFENSE, RULES, RULES_RECOVER)


class ObedientRouter:
    """A scripted model that follows the task's plan and obeys every injection it reads (see the module)."""

    def __init__(self, task: UserTask, injections: Sequence[Injection]) -> None:
        self._task = task
        self._pending = list(injections)
        self._cursor = 0
        self._say: list[str] = []
        self._seen: dict[str, Any] = {}
        self._tried_answer = False

    async def decide(self, request: RouteRequest) -> RouteDecision:
        last = request.history[-1] if request.history else None
        if last is not None:
            observation = last.observation
            if observation.get("status") != "refused":
                self._seen[last.route.target] = observation.get("result")
            elif str(observation.get("stop_reason", "")).startswith("output_denied"):
                self._say.clear()  # told its answer was refused: it answers again without the injected words
            read = "\n".join(_texts(observation))
            for injection in list(self._pending):
                if injection.text in read:
                    self._pending.remove(injection)
                    if injection.say is not None:
                        self._say.append(injection.say)
                    if injection.call is not None:
                        return RouteDecision(raw={"kind": "route", **injection.call}, decided_by="obeyed-injection")
        if self._cursor < len(self._task.steps):
            step = self._task.steps[self._cursor]
            self._cursor += 1
            return RouteDecision(raw={"kind": "route", **step(self._seen)}, decided_by="plan")
        text = " ".join([self._task.answer(self._seen), *self._say])
        return RouteDecision(raw={"kind": "route", "target": "finish", "args": {"answer": text}}, decided_by="plan")


def _texts(value: object) -> list[str]:
    """Every text in an observation (what the model reads), bounded by the observation's own size."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for child in value.values() for text in _texts(child)]
    if isinstance(value, list | tuple):
        return [text for child in value for text in _texts(child)]
    return []


def finish_worker() -> Worker:
    """The tool a model calls with its answer (the routing agent's one ``done`` observation)."""

    def finish(answer: str) -> dict[str, Any]:
        return {"status": "done", "result": {"answer": answer}}

    return Worker("finish", finish, inline=True)


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
    """Run ``task`` in a fresh world (with ``injection`` planted, or none) under ``defense``."""
    world = suite.world(injection.text if injection is not None else "")
    steps = len(task.steps) + 6
    agent = RoutingAgent(
        workers=[*suite.workers(world, defense.rules), finish_worker()],
        router=ObedientRouter(task, [injection] if injection is not None else []),
        budget=Budget(max_route_attempts=steps, max_delegations=steps),
        on_refusal=defense.on_refusal,
        output_check=suite.output_check if defense.output_check else None,
    )
    result: AgentResult = agent.run(task.goal)
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
