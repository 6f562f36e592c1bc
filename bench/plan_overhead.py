"""Plan-engine overhead: classify → one of 3 branches → rejoin, with deterministic steps, µs per run.

Side by side in one process: a plain-Python floor (the same calls and an if/elif), routegate's Plan (sync ``run``
and async ``arun``; form A ``routes=`` with the when DSL and form B ``routes_by=`` with a pydantic output; form A
with async steps under a ``Budget`` — a deadline timer per run — and streamed through ``iter()``),
lazybridge's Plan (the reference implementation of the routing seed; async targets, its fastest path, and sync
targets, which it runs on a worker thread) and LangGraph (``StateGraph`` + ``add_conditional_edges``).

Every variant is first checked to give the floor's answer for each of the three inputs; the inputs then rotate so
each branch is taken a third of the time. Reported: the best of ``--repeats`` samples (the machine is shared),
µs per run, the ratio to the floor, and routegate's speed-up over each peer.

Run: python bench/plan_overhead.py [--runs N] [--repeats R] [--peer-runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypedDict

from pydantic import BaseModel

from routegate.core import Budget, FinalEvent
from routegate.plan import Plan, Step, when

INPUTS = ("the site is down for everyone", "please update my billing address", "buy cheap watches now")
SEVERITY = Literal["urgent", "normal", "spam"]


# -- the deterministic steps, shared by every variant ---------------------------------------------------------------
def classify(text: str) -> dict[str, str]:
    if "down" in text:
        return {"severity": "urgent", "text": text}
    if "buy" in text:
        return {"severity": "spam", "text": text}
    return {"severity": "normal", "text": text}


def urgent(ticket: Any) -> str:
    return "paged on-call"


def normal(ticket: Any) -> str:
    return "added to backlog"


def spam(ticket: Any) -> str:
    return "closed as spam"


def archive(outcome: str) -> str:
    return f"archived: {outcome}"


async def aclassify(text: str) -> dict[str, str]:
    return classify(text)


async def aurgent(ticket: Any) -> str:
    return urgent(ticket)


async def anormal(ticket: Any) -> str:
    return normal(ticket)


async def aspam(ticket: Any) -> str:
    return spam(ticket)


async def aarchive(outcome: str) -> str:
    return archive(outcome)


# -- floor --------------------------------------------------------------------------------------------------------
def floor_run(text: str) -> str:
    ticket = classify(text)
    severity = ticket["severity"]
    if severity == "urgent":
        outcome = urgent(ticket)
    elif severity == "normal":
        outcome = normal(ticket)
    else:
        outcome = spam(ticket)
    return archive(outcome)


# -- routegate ----------------------------------------------------------------------------------------------------
def routegate_form_a(*, use_async: bool = False, budget: Budget | None = None) -> Plan:
    fns = (aclassify, aurgent, anormal, aspam, aarchive) if use_async else (classify, urgent, normal, spam, archive)
    return Plan(
        Step(
            fns[0],
            name="classify",
            routes={
                "urgent": when.field("severity").equals("urgent"),
                "normal": when.field("severity").equals("normal"),
                "spam": when.field("severity").equals("spam"),
            },
            after_branches="archive",
        ),
        Step(fns[1], name="urgent"),
        Step(fns[2], name="normal"),
        Step(fns[3], name="spam"),
        Step(fns[4], name="archive"),
        budget=budget,
    )


class Triage(BaseModel):
    severity: SEVERITY
    text: str


def routegate_form_b() -> Plan:
    return Plan(
        Step(classify, name="classify", output=Triage, routes_by="severity", after_branches="archive"),
        Step(urgent, name="urgent"),
        Step(normal, name="normal"),
        Step(spam, name="spam"),
        Step(archive, name="archive"),
    )


# -- lazybridge -----------------------------------------------------------------------------------------------------
def lazybridge_runner(*, use_async: bool) -> Callable[[str], Awaitable[str]]:
    from lazybridge import Envelope
    from lazybridge import Plan as LBPlan
    from lazybridge import Step as LBStep
    from lazybridge import when as lb_when

    fns = (aclassify, aurgent, anormal, aspam, aarchive) if use_async else (classify, urgent, normal, spam, archive)
    plan = LBPlan(
        LBStep(
            fns[0],
            name="classify",
            routes={
                "urgent": lb_when.field("severity").equals("urgent"),
                "normal": lb_when.field("severity").equals("normal"),
                "spam": lb_when.field("severity").equals("spam"),
            },
            after_branches="archive",
        ),
        LBStep(fns[1], name="urgent"),
        LBStep(fns[2], name="normal"),
        LBStep(fns[3], name="spam"),
        LBStep(fns[4], name="archive"),
    )
    plan._validate({})  # what Agent(engine=plan) does; we call the engine directly, without the Agent layer

    async def run(text: str) -> str:
        env = await plan.run(Envelope.from_task(text), tools=[], output_type=str, memory=None, session=None)
        return str(env.payload)

    return run


# -- LangGraph ----------------------------------------------------------------------------------------------------
class GraphState(TypedDict, total=False):
    text: str
    severity: str
    outcome: str
    result: str


def langgraph_app() -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(GraphState)
    graph.add_node("classify", lambda state: {"severity": classify(state["text"])["severity"]})
    graph.add_node("urgent", lambda state: {"outcome": urgent(state)})
    graph.add_node("normal", lambda state: {"outcome": normal(state)})
    graph.add_node("spam", lambda state: {"outcome": spam(state)})
    graph.add_node("archive", lambda state: {"result": archive(state["outcome"])})
    graph.add_edge(START, "classify")
    graph.add_conditional_edges(
        "classify", lambda state: state["severity"], {"urgent": "urgent", "normal": "normal", "spam": "spam"}
    )
    for branch in ("urgent", "normal", "spam"):
        graph.add_edge(branch, "archive")
    graph.add_edge("archive", END)
    return graph.compile()


# -- timing -------------------------------------------------------------------------------------------------------
def time_sync(fn: Callable[[str], Any], runs: int, repeats: int) -> float:
    """Best-of-``repeats`` mean µs per call; the inputs rotate so every branch is taken."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for i in range(runs):
            fn(INPUTS[i % 3])
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return min(samples)


async def time_async(fn: Callable[[str], Awaitable[Any]], runs: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for i in range(runs):
            await fn(INPUTS[i % 3])
        samples.append((time.perf_counter() - started) / runs * 1e6)
    return min(samples)


def check(name: str, answers: Sequence[str]) -> None:
    expected = [floor_run(text) for text in INPUTS]
    if list(answers) != expected:
        raise SystemExit(f"{name} gave {list(answers)}, expected {expected}")


def measure(runs: int, repeats: int, peer_runs: int, *, peers: bool = True) -> list[tuple[str, float]]:
    form_a, form_a_async, form_b = routegate_form_a(), routegate_form_a(use_async=True), routegate_form_b()
    form_a_budget = routegate_form_a(use_async=True, budget=Budget(max_seconds=60))
    check("routegate run", [form_a.run(t).output for t in INPUTS])
    check("routegate routes_by", [form_b.run(t).output for t in INPUTS])
    check("routegate arun", [asyncio.run(form_a.arun(t)).output for t in INPUTS])
    check("routegate arun, async steps", [asyncio.run(form_a_async.arun(t)).output for t in INPUTS])
    check("routegate arun, async steps, budget", [asyncio.run(form_a_budget.arun(t)).output for t in INPUTS])

    async def iter_a(text: str) -> Any:
        async for event in form_a.iter(text):
            if isinstance(event, FinalEvent):
                return event.result
        raise AssertionError("iter() ended without its final event")

    check("routegate iter", [asyncio.run(iter_a(t)).output for t in INPUTS])

    async def arun_a(text: str) -> Any:
        return await form_a.arun(text)

    async def arun_async_steps(text: str) -> Any:
        return await form_a_async.arun(text)

    async def arun_budget(text: str) -> Any:
        return await form_a_budget.arun(text)

    rows = [
        ("plain Python (floor)", time_sync(floor_run, runs, repeats)),
        ("routegate run (sync), routes= + when", time_sync(form_a.run, runs, repeats)),
        ("routegate arun, routes= + when", asyncio.run(time_async(arun_a, runs, repeats))),
        ("routegate arun, async steps", asyncio.run(time_async(arun_async_steps, runs, repeats))),
        ("routegate run, routes_by + pydantic output", time_sync(form_b.run, runs, repeats)),
        ("routegate arun, async steps + budget (timer)", asyncio.run(time_async(arun_budget, runs, repeats))),
        ("routegate iter (events streamed)", asyncio.run(time_async(iter_a, runs, repeats))),
    ]
    if not peers:
        return rows
    lb_async, lb_sync = lazybridge_runner(use_async=True), lazybridge_runner(use_async=False)

    async def lb_check(run: Callable[[str], Awaitable[str]]) -> list[str]:
        return [await run(t) for t in INPUTS]

    check("lazybridge (async steps)", asyncio.run(lb_check(lb_async)))
    check("lazybridge (sync steps)", asyncio.run(lb_check(lb_sync)))
    app = langgraph_app()
    check("LangGraph invoke", [app.invoke({"text": t})["result"] for t in INPUTS])
    rows += [
        ("lazybridge Plan, async steps (its fastest)", asyncio.run(time_async(lb_async, peer_runs, repeats))),
        ("lazybridge Plan, sync steps (thread hop)", asyncio.run(time_async(lb_sync, max(peer_runs // 4, 1), repeats))),
        ("LangGraph StateGraph.invoke", time_sync(lambda t: app.invoke({"text": t}), max(peer_runs // 4, 1), repeats)),
        (
            "LangGraph StateGraph.ainvoke",
            asyncio.run(time_async(lambda t: app.ainvoke({"text": t}), max(peer_runs // 4, 1), repeats)),
        ),
    ]
    return rows


def report(rows: list[tuple[str, float]]) -> str:
    values = dict(rows)
    floor = values["plain Python (floor)"]
    lines = [f"{'variant':46} {'µs/run':>9} {'x floor':>8}"]
    lines += [f"{name:46} {value:9.2f} {value / floor:8.1f}" for name, value in rows]
    ours = {
        "sync": values["routegate run (sync), routes= + when"],
        "async": values["routegate arun, routes= + when"],
    }
    for peer in ("lazybridge Plan, async steps (its fastest)", "LangGraph StateGraph.invoke"):
        if peer in values:
            lines.append(
                f"routegate is {values[peer] / ours['sync']:.1f}x (sync) / {values[peer] / ours['async']:.1f}x (async) "
                f"faster than {peer}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20_000, help="routegate/floor runs per sample (default 20000)")
    parser.add_argument("--peer-runs", type=int, default=2_000, help="lazybridge runs per sample (LangGraph: 1/4)")
    parser.add_argument("--repeats", type=int, default=5, help="timing samples; the best is reported (default 5)")
    parser.add_argument("--no-peers", action="store_true", help="time routegate and the floor only")
    args = parser.parse_args(argv)
    rows = measure(args.runs, args.repeats, args.peer_runs, peers=not args.no_peers)
    print(f"python {platform.python_version()} on {platform.machine()}, best of {args.repeats} samples")
    print(report(rows))


if __name__ == "__main__":
    main()
