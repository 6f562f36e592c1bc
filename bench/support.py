"""Support desk benchmark: start-up, routing accuracy and latency, end-to-end ``ask`` latency per route.

Everything runs offline on the embedded default (pgserver PostgreSQL + pgvector, MiniLM int8 encoder, grounded
composer). Peers, side by side in the same process:

* routing accuracy: the shipped cascade (rules → ``routegate.routers.semantic.SemanticRouter`` fitted on the route
  examples → default) against the same cascade with the thin nearest-example layer, the spec's signal words as a keyword-priority router (``routegate.routers.rules.KeywordRouter``
  with the spec's words and priority, LLM when nothing matches) and the embedding layer alone (nearest route by
  example utterances, never abstaining) against the full cascade (rules → semantic → default);
* orchestration: the same turn (same router, same tool nodes, same composer) wired as a LangGraph ``StateGraph``
  instead of the desk's governed ``routegate.plan.Plan`` (policy boundary, two allowlists, per-turn delegation
  ledger, deadline, trace).

Run: python bench/support.py [--data tests/data/support_routes.jsonl] [--asks 40] [--route-passes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, TypedDict

from routegate.apps.support.contracts import ROUTES
from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.router import SupportRouter
from routegate.apps.support.semantic import ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.core import RouteRequest
from routegate.embed import MiniLMEncoder
from routegate.routers.rules import KeywordRouter

ROOT = Path(__file__).resolve().parents[1]
ASK_QUERIES = {
    "POSTGRES": ["Show tickets for customer John", "What is the status of ticket 1?", "Which city is customer 3 from?"],
    "VECTOR": ["How do I reset my password?", "What is your refund policy?", "Explain ticket escalation"],
    "EXTERNAL": ["What’s the weather today?", "What is the price of Bitcoin?", "temperature in London"],
    "LLM": ["Can you help me?", "What can you do?", "Explain this system"],
}
SPEC_SIGNAL_WORDS = {
    "POSTGRES": ["customer", "ticket", "issue", "status", "account", "id", "city"],
    "VECTOR": ["how do i", "help", "policy", "guide", "explain", "support"],
    "EXTERNAL": ["weather", "temperature", "price", "crypto", "bitcoin"],
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5):.2f} ms, p99 {pct(values, 0.99):.2f} ms (n={len(values)})"


async def accuracy(
    rows: list[dict[str, Any]], cascade: SupportRouter, thin: SupportRouter, semantic: ExampleEmbeddingLayer
) -> None:
    keyword = KeywordRouter(SPEC_SIGNAL_WORDS, default="LLM", args=lambda r: {"query": r.goal})
    from routegate.apps.support.router import CATALOG

    results: dict[str, Counter[str]] = defaultdict(Counter)
    totals: Counter[str] = Counter()
    for row in rows:
        totals[row["route"]] += 1
        choice = await cascade.route_choice(row["text"])
        results["cascade"][row["route"]] += choice.route == row["route"]
        results["cascade, thin"][row["route"]] += (await thin.route_choice(row["text"])).route == row["route"]
        decision = await keyword.decide(RouteRequest(goal=row["text"], catalog=CATALOG))
        target = decision.raw["target"] if isinstance(decision.raw, dict) else None
        results["spec keywords"][row["route"]] += target == row["route"]
        scores = semantic.scores(row["text"])
        results["semantic only"][row["route"]] += max(scores, key=lambda r: scores[r]) == row["route"]
    print(f"\nrouting accuracy on {len(rows)} labelled queries ({dict(Counter(r['split'] for r in rows))})")
    print("cascade = rules -> fitted SemanticRouter -> default; 'cascade, thin' = rules -> nearest examples -> default")
    print(f"{'router':15s} {'overall':>8s} " + " ".join(f"{r:>9s}" for r in ROUTES))
    for name, hits in results.items():
        overall = sum(hits.values()) / len(rows)
        per = " ".join(f"{hits[r] / totals[r]:9.1%}" for r in ROUTES)
        print(f"{name:15s} {overall:8.1%} {per}")
    for name, router in (("cascade", cascade), ("cascade, thin", thin)):
        for split in ("dev", "test", "spec"):
            subset = [r for r in rows if r["split"] == split]
            correct = 0
            for row in subset:
                correct += (await router.route_choice(row["text"])).route == row["route"]
            print(f"{name} on {split:5s}: {correct}/{len(subset)} = {correct / len(subset):.1%}")


async def routing_latency(rows: list[dict[str, Any]], router: SupportRouter, passes: int) -> None:
    timings: dict[str, list[float]] = defaultdict(list)
    for _ in range(passes):
        for row in rows:
            started = time.perf_counter()
            choice = await router.route_choice(row["text"])
            elapsed = (time.perf_counter() - started) * 1000
            timings[choice.layer].append(elapsed)
            timings["all"].append(elapsed)
    print("\nrouting decision latency (router.choose, no tool)")
    for layer, values in timings.items():
        print(f"  {layer:9s} {ms(values)}")


class GraphState(TypedDict, total=False):
    message: str
    route: str
    observation: dict[str, Any]
    answer: str


def langgraph_peer(desk: SupportAgent) -> Any:
    """The same Router → tool node → Respond graph, wired with LangGraph (no policy boundary, no budgets)."""
    from langgraph.graph import END, START, StateGraph

    assert desk.router is not None and desk.gateway is not None
    router = desk.router
    nodes = dict(desk.gateway.workers)

    async def route_node(state: GraphState) -> GraphState:
        return {"route": (await router.route_choice(state["message"])).route}

    def tool_node(name: str) -> Any:
        async def run(state: GraphState) -> GraphState:
            return {"observation": await nodes[name].fn(query=state["message"])}

        return run

    compose = desk.answers.compose

    async def respond_node(state: GraphState) -> GraphState:
        return {"answer": compose(state["message"], state["route"], state.get("observation") or {})}

    graph = StateGraph(GraphState)
    graph.add_node("router", route_node)
    for name in nodes:
        graph.add_node(name, tool_node(name))
        graph.add_edge(name, "respond")
    graph.add_node("respond", respond_node)
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", lambda s: s["route"], {r: r if r in nodes else "respond" for r in ROUTES})
    graph.add_edge("respond", END)
    return graph.compile()


async def ask_latency(desk: SupportAgent, asks: int) -> None:
    print(f"\nend-to-end latency per route (offline, warm, {asks} turns per route, the three runs interleaved)")
    print("  ask = SupportAgent.ask (memory read + write included); plan = the same turn through the desk's Plan")
    print("  (SupportAgent.run_turn) without memory; langgraph = the same nodes as a LangGraph StateGraph, no memory")
    peer = langgraph_peer(desk)
    totals: dict[str, list[float]] = defaultdict(list)
    for route, queries in ASK_QUERIES.items():
        timings: dict[str, list[float]] = defaultdict(list)
        for i in range(asks):
            query = queries[i % len(queries)]
            started = time.perf_counter()
            result = await desk.ask(query, session_id=f"bench-{route}")
            timings["ask"].append((time.perf_counter() - started) * 1000)
            assert result.route == route, (query, result.route)
            turn = desk.new_turn(query, session_id="plan")
            started = time.perf_counter()
            run = await desk.run_turn(turn)
            timings["plan"].append((time.perf_counter() - started) * 1000)
            assert (run.route, run.stop_reason) == (route, "success"), (query, run.route, run.stop_reason)
            started = time.perf_counter()
            state = await peer.ainvoke({"message": query})
            timings["langgraph"].append((time.perf_counter() - started) * 1000)
            assert state["route"] == route
        for name, values in timings.items():
            totals[name] += values
        ratio = pct(timings["plan"], 0.5) / pct(timings["langgraph"], 0.5)
        print(
            f"  {route:9s} ask {ms(timings['ask'])} | plan {ms(timings['plan'])} | "
            f"langgraph {ms(timings['langgraph'])} | plan/langgraph p50 {ratio:.2f}x"
        )
    ratio = pct(totals["plan"], 0.5) / pct(totals["langgraph"], 0.5)
    print(
        f"  all       ask {ms(totals['ask'])} | plan {ms(totals['plan'])} | "
        f"langgraph {ms(totals['langgraph'])} | plan/langgraph p50 {ratio:.2f}x"
    )


async def main_async(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.processor() or 'cpu'}")
    print(f"{os.cpu_count()} cores, load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    workdir = Path(tempfile.mkdtemp(prefix="routegate-bench-"))
    try:
        server = EmbeddedPostgres(workdir / "pg")
        started = time.perf_counter()
        url = server.start()
        cold = time.perf_counter() - started
        server.stop()
        started = time.perf_counter()
        url = server.start()
        warm = time.perf_counter() - started
        started = time.perf_counter()
        encoder = MiniLMEncoder()
        encoder.warm_up()
        encoder_load = time.perf_counter() - started
        started = time.perf_counter()
        fitted = FittedSemanticLayer.load_or_fit(encoder, workdir)
        fit_time = time.perf_counter() - started
        started = time.perf_counter()
        fitted = FittedSemanticLayer.load_or_fit(encoder, workdir)
        load_time = time.perf_counter() - started
        db = SupportDatabase(url)
        started = time.perf_counter()
        await db.open()
        desk = SupportAgent(db=db, encoder=encoder, semantic=fitted)
        await desk.start()
        desk_start = time.perf_counter() - started
        thin_layer = ExampleEmbeddingLayer(encoder)
        print("\nstart-up")
        print(f"  embedded PostgreSQL, cold (initdb + start): {cold:.2f} s")
        print(f"  embedded PostgreSQL, restart on existing data: {warm:.2f} s")
        print(f"  encoder load: {encoder_load:.2f} s")
        print(f"  fit the SemanticRouter on the route examples (first start only): {fit_time:.2f} s")
        print(f"  load the fitted router from its cache (later starts): {load_time * 1000:.0f} ms")
        print(f"  desk start (schema + seed + ingest the 3 articles + pool): {desk_start:.2f} s")
        assert desk.router is not None
        await accuracy(rows, desk.router, SupportRouter(semantic=thin_layer), thin_layer)
        await routing_latency(rows, desk.router, args.route_passes)
        await ask_latency(desk, args.asks)
        print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        await db.close()
        server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "tests" / "data" / "support_routes.jsonl")
    parser.add_argument("--asks", type=int, default=40, help="asks per route (default 40)")
    parser.add_argument("--route-passes", type=int, default=3, help="passes over the labelled set for latency")
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
