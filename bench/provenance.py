"""Argument provenance: attack success and utility on the injection suites, and the governed overhead it adds.

Part 1 replays every suite of ``routegate.testing.injection`` (tasks alone, then every task x injection pair) under
each defense through the tool agent, with the scripted model that obeys every injection, and prints the table of
docs/benchmarks/security.md. These are correctness figures: the same on every machine.

Part 2 times one governed decision (the routing agent, a scripted router, one worker, the trivial finalizer — the
request of bench/core_overhead.py) with and without flow rules on the worker: the difference is what keeping the
run's sources and matching the arguments costs per decision. The same for one technique dispatch (one tool call
with the request's text as its argument, ``request=`` given) with and without ``flows=`` on its target, and for one
tool agent run (a model that calls the tool with the request's text, then answers) with and without a rule on the
tool. Run: python bench/provenance.py [--runs N] [--suites-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import time
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel

from core_overhead import GOAL, time_async  # the same request and timing loop as the governed-loop figure
from routegate.core import (
    Budget,
    FinalizeRequest,
    From,
    RouteDecision,
    RouteRequest,
    Worker,
    WorkerArgs,
)
from routegate.core import worker as make_worker
from routegate.llm.structured import ModelReply, OutputFormat, ToolCall
from routegate.plan import RoutingAgent, ToolAgent
from routegate.technique import OutputKind, TechniqueDispatcher, TechniqueRouter
from routegate.technique.types import TechniqueItem, ToolCallRequest
from routegate.testing.injection import DEFENSES, SUITES, measure

DECISION = {"kind": "route", "target": "billing", "args": {"ticket": GOAL}}


class PlainArgs(WorkerArgs):
    ticket: str


class RuledArgs(WorkerArgs):
    ticket: Annotated[str, From("user")]


def billing(ticket: str) -> dict[str, Any]:
    return {"status": "done", "domain": "billing", "result": {"refund_amount_usd": 49.0, "ticket_len": len(ticket)}}


class ScriptedRouter:
    async def decide(self, request: RouteRequest) -> RouteDecision:
        return RouteDecision(raw=DECISION, decided_by="script")


class TrivialFinalizer:
    async def finalize(self, request: FinalizeRequest) -> str:
        return f"{request.selected_route}: refund {request.observation['result']['refund_amount_usd']} USD"


def build(args_model: type[WorkerArgs]) -> RoutingAgent:
    return RoutingAgent(
        workers=[make_worker(billing, args=args_model, inline=True)],
        router=ScriptedRouter(),
        finalizer=TrivialFinalizer(),
        budget=Budget(max_route_attempts=3, max_delegations=3, max_seconds=60),
    )


@dataclass
class EchoTools:
    """A tool-call handler whose one tool does nothing: the dispatch figure is the governance cost."""

    kind: OutputKind = OutputKind.TOOL_CALL
    prefix: str = "mcp"

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        assert isinstance(item, ToolCallRequest)
        return f"mcp:{item.qualified_name}", dict(item.arguments)

    def schema(self, target: str) -> type[BaseModel] | None:
        return None

    def worker(self, target: str) -> Worker | None:
        return Worker(target, lambda **args: {"ok": True}, inline=True)


TARGET = "mcp:desk/refund"
CALL = TechniqueRouter().classify(
    "```tool_call\n" + json.dumps({"server": "desk", "method": "refund", "arguments": {"ticket": GOAL}}) + "\n```"
)


def dispatcher(*, rules: bool) -> TechniqueDispatcher:
    flows = {TARGET: {"ticket": From("user")}} if rules else None
    return TechniqueDispatcher(handlers=[EchoTools()], allow=[TARGET], flows=flows)


async def time_dispatch(d: TechniqueDispatcher, runs: int, repeats: int) -> float:
    """Best-of-``repeats`` mean µs per dispatch."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(runs):
            await d.adispatch(CALL, request=GOAL)
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return min(samples)


class OneCallModel:
    """A model that calls the tool with the request's text on its first turn and answers on its second: the tool
    agent's figure is the governance of one call and one answer."""

    CALL = (ToolCall("billing", json.dumps({"ticket": GOAL}), "call_1"),)

    async def respond(self, messages: Any, *, output: OutputFormat, temperature: float = 0.0) -> ModelReply:
        if messages[-1]["role"] == "tool":
            return ModelReply(text="refund on its way")
        return ModelReply(tool_calls=self.CALL)


def tool_agent(args_model: type[WorkerArgs]) -> ToolAgent[Any]:
    return ToolAgent(model=OneCallModel(), tools=[make_worker(billing, args=args_model, inline=True)])


def suites_table() -> None:
    print(
        "| suite | defense | tasks | pairs | utility (no injection) | utility under attack | attack success | "
        "legitimate calls refused |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for suite in SUITES:
        for defense in DEFENSES:
            f = measure(suite, defense)
            print(
                f"| {f.suite} | {f.defense} | {f.tasks} | {f.pairs} | {f.benign_utility:.0%} | {f.attack_utility:.0%} "
                f"| {f.attack_success:.1%} | {f.benign_refusals} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5_000, help="requests per timing sample (default 5000)")
    parser.add_argument("--repeats", type=int, default=5, help="timing samples; the best is reported (default 5)")
    parser.add_argument("--suites-only", action="store_true", help="print the suites' table only (no timings)")
    args = parser.parse_args()
    suites_table()
    if args.suites_only:
        return
    plain, ruled = build(PlainArgs), build(RuledArgs)
    checked = ruled.run(GOAL)
    assert plain.run(GOAL).ok and checked.ok and checked.trace[0].provenance == {"ticket": ("user",)}
    without = asyncio.run(time_async(plain, args.runs, args.repeats))
    with_rules = asyncio.run(time_async(ruled, args.runs, args.repeats))
    print()
    print(f"python {platform.python_version()} on {platform.machine()}, {args.runs} runs x {args.repeats}, best sample")
    print(f"{'variant':52} {'µs/run':>9}")
    print(f"{'arun, worker without flow rules':52} {without:9.2f}")
    print(f"{'arun, worker with a flow rule (ledger + matcher)':52} {with_rules:9.2f}")
    print(f"provenance overhead per decision: {with_rules - without:.2f} µs")
    plain_d, ruled_d = dispatcher(rules=False), dispatcher(rules=True)
    dispatched = ruled_d.dispatch(CALL, request=GOAL)
    assert plain_d.dispatch(CALL).ok and dispatched.ok and dispatched.output[0].provenance == {"ticket": ("user",)}
    d_without = asyncio.run(time_dispatch(plain_d, args.runs, args.repeats))
    d_with = asyncio.run(time_dispatch(ruled_d, args.runs, args.repeats))
    print(f"{'adispatch, target without flow rules':52} {d_without:9.2f}")
    print(f"{'adispatch, target with a flow rule (ledger + matcher)':52} {d_with:9.2f}")
    print(f"provenance overhead per dispatched call: {d_with - d_without:.2f} µs")
    plain_t, ruled_t = tool_agent(PlainArgs), tool_agent(RuledArgs)
    answered = ruled_t.run(GOAL)
    assert plain_t.run(GOAL).ok and answered.ok and answered.calls[0].provenance == {"ticket": ("user",)}
    t_without = asyncio.run(time_async(plain_t, args.runs, args.repeats))
    t_with = asyncio.run(time_async(ruled_t, args.runs, args.repeats))
    print(f"{'tool agent run (one call, one answer), no flow rules':52} {t_without:9.2f}")
    print(f"{'tool agent run (one call, one answer), a flow rule':52} {t_with:9.2f}")
    print(f"provenance overhead per tool call: {t_with - t_without:.2f} µs")


if __name__ == "__main__":
    main()
