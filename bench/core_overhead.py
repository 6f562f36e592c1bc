"""Governed-loop overhead: routegate's RoutingAgent vs a plain-Python floor vs the same routing loop written naively,
and vs the reference routing-agent loop (the AgentPatterns routing-agent example, with its LLM calls stubbed).

All of them do the same work per request: a scripted router returns the billing route as a dict, a deterministic
worker answers, a trivial finalizer formats the answer. The difference between routegate and the floor is what
governance costs (policy boundary with a pydantic schema, two allowlists, budgets, loop guard, deadline, trace,
result object); the reference loop is the pattern routegate implements, as its authors wrote it (dict checks, a
gateway object per run, a whitespace-normalised arguments hash, trace and history dicts), so ``arun`` / reference
is what routegate's structure costs over the pattern itself. Run: python bench/core_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import platform
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from routegate import RoutingAgent  # the top-level name: the same import before and after it moved
from routegate.core import Budget, FinalizeRequest, RouteDecision, RouteRequest, TicketArgs, worker

GOAL = "User Anna (user_id=42) asks: can I get a refund for my pro_monthly subscription charged 10 days ago?"
DECISION = {"kind": "route", "target": "billing", "args": {"ticket": GOAL}}


def billing(ticket: str) -> dict[str, Any]:
    return {"status": "done", "domain": "billing", "result": {"refund_amount_usd": 49.0, "ticket_len": len(ticket)}}


def finalize_text(target: str, observation: dict[str, Any]) -> str:
    return f"{target}: refund {observation['result']['refund_amount_usd']} USD"


# -- floor: plain dispatch, no governance ----------------------------------------------------------------------------
def floor_run(goal: str) -> dict[str, Any]:
    decision = DECISION
    observation = billing(**decision["args"])
    return {"status": "ok", "answer": finalize_text(decision["target"], observation)}


# -- the same routing loop, written naively: dict checks, exceptions for stops, no types ---------------------------
class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _naive_validate(action: Any, allowed: set[str], prev_target: Any, prev_status: Any) -> dict[str, Any]:
    if not isinstance(action, dict):
        raise _Stop("invalid_route:not_object")
    if action.get("kind") != "route":
        raise _Stop("invalid_route:bad_kind")
    if set(action) - {"kind", "target", "args"}:
        raise _Stop("invalid_route:extra_keys")
    target = action.get("target")
    if not isinstance(target, str) or not target.strip():
        raise _Stop("invalid_route:missing_target")
    target = target.strip()
    if target not in allowed:
        raise _Stop("invalid_route:route_not_allowed:" + target)
    args = action.get("args") or {}
    if not isinstance(args, dict):
        raise _Stop("invalid_route:bad_args")
    ticket = args.get("ticket")
    if not isinstance(ticket, str) or not ticket.strip():
        raise _Stop("invalid_route:missing_ticket")
    if prev_status == "needs_reroute" and target == prev_target:
        raise _Stop("invalid_route:repeat_target_after_reroute")
    return {"kind": "route", "target": target, "args": {**args, "ticket": " ".join(ticket.split())}}


def _naive_hash(args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:12]


def naive_run(goal: str) -> dict[str, Any]:
    started = time.monotonic()
    registry: dict[str, Callable[..., dict[str, Any]]] = {"billing": billing}
    allowed = {"billing"}
    trace: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    delegations, seen = 0, set()
    for attempt in range(1, 4):
        if time.monotonic() - started > 60:
            return {"status": "stopped", "stop_reason": "max_seconds"}
        prev = history[-1] if history else {}
        try:
            action = _naive_validate(
                DECISION, allowed, prev.get("route", {}).get("target"), prev.get("observation", {}).get("status")
            )
            delegations += 1
            if delegations > 3:
                raise _Stop("max_delegations")
            signature = action["target"] + ":" + _naive_hash(action["args"])
            if signature in seen:
                raise _Stop("loop_detected")
            seen.add(signature)
            observation = registry[action["target"]](**action["args"])
        except _Stop as stop:
            return {"status": "stopped", "stop_reason": stop.reason, "trace": trace}
        trace.append({"attempt": attempt, "target": action["target"], "ok": True})
        history.append({"attempt": attempt, "route": action, "observation": observation})
        if observation.get("status") == "done":
            answer = finalize_text(action["target"], observation)
            return {"status": "ok", "stop_reason": "success", "answer": answer, "trace": trace, "history": history}
    return {"status": "stopped", "stop_reason": "max_route_attempts"}


# -- the reference loop: the routing-agent pattern's own run, its two LLM calls stubbed ------------------------------
class _RefStop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_REF_LIMITS = {"max_route_attempts": 3, "max_delegations": 3, "max_seconds": 60}


def _ref_text(value: Any) -> str:
    """Canonical JSON of ``value``: keys sorted, ASCII only, containers walked by hand."""
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=True, sort_keys=True)
    if isinstance(value, list):
        return "[" + ",".join(_ref_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(json.dumps(str(k), ensure_ascii=True) + ":" + _ref_text(value[k]) for k in sorted(value))
            + "}"
        )
    return json.dumps(str(value), ensure_ascii=True)


def _ref_squash(value: Any) -> Any:
    """Strings with runs of whitespace collapsed, at any depth (so a respaced repeat hashes the same)."""
    if isinstance(value, str):
        return " ".join(value.strip().split())
    if isinstance(value, list):
        return [_ref_squash(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _ref_squash(value[k]) for k in sorted(value)}
    return value


def _ref_hash(args: dict[str, Any]) -> str:
    return hashlib.sha256(_ref_text(_ref_squash(args or {})).encode("utf-8")).hexdigest()[:12]


def _ref_check(action: Any, allowed: set[str], last_target: str | None, last_status: str | None) -> dict[str, Any]:
    """The policy boundary on the router's action: shape, allowlist, arguments, no repeat after a reroute."""
    if not isinstance(action, dict):
        raise _RefStop("invalid_route:not_object")
    kind = action.get("kind")
    if kind == "invalid":
        raise _RefStop("invalid_route:non_json")
    if kind != "route":
        raise _RefStop("invalid_route:bad_kind")
    if set(action.keys()) - {"kind", "target", "args"}:
        raise _RefStop("invalid_route:extra_keys")
    target = action.get("target")
    if not isinstance(target, str) or not target.strip():
        raise _RefStop("invalid_route:missing_target")
    target = target.strip()
    if target not in allowed:
        raise _RefStop(f"invalid_route:route_not_allowed:{target}")
    args = action.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _RefStop("invalid_route:bad_args")
    ticket = args.get("ticket")
    if not isinstance(ticket, str) or not ticket.strip():
        raise _RefStop("invalid_route:missing_ticket")
    if last_status == "needs_reroute" and target == last_target:
        raise _RefStop("invalid_route:repeat_target_after_reroute")
    return {"kind": "route", "target": target, "args": {**args, "ticket": " ".join(ticket.strip().split())}}


class _RefGateway:
    """The execution side: delegation budget, execution allowlist, registry, loop guard, worker faults."""

    def __init__(self, allow: set[str], registry: dict[str, Callable[..., dict[str, Any]]]) -> None:
        self.allow, self.registry = set(allow), registry
        self.delegations = 0
        self.seen: set[str] = set()

    def call(self, target: str, args: dict[str, Any]) -> dict[str, Any]:
        self.delegations += 1
        if self.delegations > _REF_LIMITS["max_delegations"]:
            raise _RefStop("max_delegations")
        if target not in self.allow:
            raise _RefStop(f"route_denied:{target}")
        fn = self.registry.get(target)
        if fn is None:
            raise _RefStop(f"route_missing:{target}")
        signature = f"{target}:{_ref_hash(args)}"
        if signature in self.seen:
            raise _RefStop("loop_detected")
        self.seen.add(signature)
        try:
            return fn(**args)
        except TypeError as exc:
            raise _RefStop(f"route_bad_args:{target}") from exc
        except Exception as exc:
            raise _RefStop(f"route_error:{target}") from exc


def _ref_decide(goal: str, history: list[dict[str, Any]], forbidden: list[str]) -> dict[str, Any]:
    return DECISION  # the stubbed router LLM


def _ref_compose(goal: str, target: str, history: list[dict[str, Any]]) -> str:
    return "billing: refund 49.0 USD"  # the stubbed finalizer LLM


_REF_ROUTES = {"billing"}


def reference_run(goal: str) -> dict[str, Any]:
    """Route → delegate → (reroute) → finalize, as the pattern's own loop does it."""
    started = time.monotonic()
    trace: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    gateway = _RefGateway(_REF_ROUTES, {"billing": billing})
    for attempt in range(1, _REF_LIMITS["max_route_attempts"] + 1):
        if time.monotonic() - started > _REF_LIMITS["max_seconds"]:
            return {"status": "stopped", "stop_reason": "max_seconds", "trace": trace, "history": history}
        last = history[-1] if history else None
        last_observation = last.get("observation") if isinstance(last, dict) else None
        last_route = last.get("route") if isinstance(last, dict) else None
        last_status = last_observation.get("status") if isinstance(last_observation, dict) else None
        last_target = last_route.get("target") if isinstance(last_route, dict) else None
        forbidden = [last_target] if last_status == "needs_reroute" and isinstance(last_target, str) else []
        raw = _ref_decide(goal, history, forbidden)
        try:
            action = _ref_check(raw, _REF_ROUTES, last_target, last_status)
        except _RefStop as stop:
            return {"status": "stopped", "stop_reason": stop.reason, "phase": "route", "raw_route": raw}
        target, args = action["target"], action["args"]
        try:
            observation = gateway.call(target, args)
            trace.append({"attempt": attempt, "target": target, "args_hash": _ref_hash(args), "ok": True})
        except _RefStop as stop:
            trace.append({"attempt": attempt, "target": target, "args_hash": _ref_hash(args), "ok": False})
            return {"status": "stopped", "stop_reason": stop.reason, "phase": "delegate", "trace": trace}
        history.append({"attempt": attempt, "route": action, "observation": observation})
        status = observation.get("status")
        trace[-1]["observation_status"] = status
        if isinstance(observation, dict) and observation.get("domain"):
            trace[-1]["domain"] = observation.get("domain")
        if status == "needs_reroute":
            continue
        if status != "done":
            return {"status": "stopped", "stop_reason": "route_bad_observation", "phase": "delegate"}
        answer = _ref_compose(goal, target, history)
        return {"status": "ok", "stop_reason": "success", "selected_route": target, "answer": answer, "trace": trace}
    return {"status": "stopped", "stop_reason": "max_route_attempts", "trace": trace, "history": history}


# -- routegate ------------------------------------------------------------------------------------------------------
class ScriptedRouter:
    async def decide(self, request: RouteRequest) -> RouteDecision:
        return RouteDecision(raw=DECISION, decided_by="script")


class TrivialFinalizer:
    async def finalize(self, request: FinalizeRequest) -> str:
        return finalize_text(request.selected_route, dict(request.observation))


def build_agent(*, inline: bool) -> RoutingAgent:
    return RoutingAgent(
        workers=[worker(billing, args=TicketArgs, inline=inline)],
        router=ScriptedRouter(),
        finalizer=TrivialFinalizer(),
        budget=Budget(max_route_attempts=3, max_delegations=3, max_seconds=60),
    )


def time_sync(fn: Callable[[str], object], runs: int, repeats: int) -> float:
    """Best-of-``repeats`` mean µs per call (best-of filters noise from the shared machine)."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(runs):
            fn(GOAL)
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return min(samples)


class Runs(Protocol):
    """What :func:`time_async` times: a runtime whose ``arun`` takes the request (the routing agent, the tool agent)."""

    def arun(self, goal: str) -> Awaitable[Any]: ...


async def time_async(agent: Runs, runs: int, repeats: int) -> float:
    """Best-of-``repeats`` mean µs per ``arun``."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(runs):
            await agent.arun(GOAL)
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return min(samples)


async def interleaved(agent: RoutingAgent, runs: int, chunks: int) -> list[float]:
    """``arun`` ÷ the reference loop per chunk: ``runs`` reference runs, then ``runs`` ``arun``s, ``chunks`` times.
    Both halves of a chunk see the same machine, so the ratio moves less than the rounds' timings do."""
    ratios = []
    for _ in range(chunks):
        started = time.perf_counter()
        for _ in range(runs):
            reference_run(GOAL)
        reference = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(runs):
            await agent.arun(GOAL)
        ratios.append((time.perf_counter() - started) / reference)
    return sorted(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000, help="requests per timing sample (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="timing samples; the best is reported (default 5)")
    parser.add_argument(
        "--interleaved",
        type=int,
        default=0,
        metavar="CHUNKS",
        help="only the ratio arun / reference, in CHUNKS alternating chunks of --runs each (median and range)",
    )
    args = parser.parse_args()
    inline, threaded = build_agent(inline=True), build_agent(inline=False)
    assert inline.run(GOAL).ok and naive_run(GOAL)["status"] == "ok" and reference_run(GOAL)["status"] == "ok"
    if args.interleaved:
        ratios = asyncio.run(interleaved(inline, args.runs, args.interleaved))
        print(
            f"arun / reference routing-agent loop, {args.interleaved} interleaved chunks of {args.runs}: "
            f"median {ratios[len(ratios) // 2]:.2f}x (range {ratios[0]:.2f}-{ratios[-1]:.2f}x)"
        )
        return

    floor = time_sync(floor_run, args.runs, args.repeats)
    naive = time_sync(naive_run, args.runs, args.repeats)
    reference = time_sync(reference_run, args.runs, args.repeats)
    governed_async = asyncio.run(time_async(inline, args.runs, args.repeats))
    governed_sync = time_sync(inline.run, args.runs, args.repeats)
    governed_thread = asyncio.run(time_async(threaded, max(args.runs // 10, 100), args.repeats))

    print(f"python {platform.python_version()} on {platform.machine()}, {args.runs} runs x {args.repeats}, best sample")
    rows = [
        ("plain-Python dispatch (floor)", floor),
        ("naive loop (dicts, no types)", naive),
        ("reference routing-agent loop (stubbed LLM)", reference),
        ("routegate arun, inline worker", governed_async),
        ("routegate run (sync), inline worker", governed_sync),
        ("routegate arun, sync worker on a thread", governed_thread),
    ]
    print(f"{'variant':44} {'µs/run':>9} {'x floor':>8} {'overhead µs':>12}")
    for name, value in rows:
        print(f"{name:44} {value:9.2f} {value / floor:8.1f} {value - floor:12.2f}")
    print(f"governed overhead per routed request (arun, inline): {governed_async - floor:.2f} µs")
    print(f"arun / reference routing-agent loop: {governed_async / reference:.2f}x")


if __name__ == "__main__":
    main()
