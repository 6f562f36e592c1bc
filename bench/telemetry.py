"""What OpenTelemetry costs a governed run: no SDK (the library default) vs the SDK with a batch exporter.

One process, the same RoutingAgent run as ``bench/core_overhead.py`` (scripted router, inline worker, trivial
finalizer), three ways, interleaved sample by sample:

* **no SDK** — nothing installed a tracer provider: routegate opens no span;
* **SDK, not sampled** — an SDK provider with the ``always_off`` sampler (spans are created, nothing recorded);
* **SDK + batch exporter** — every span recorded and handed to a ``BatchSpanProcessor`` whose exporter drops
  the batch (so the figure is routegate's and the SDK's cost, not a network's).

A run opens five spans (run, route, policy, delegate, finalize); the per-span figure is the difference over the
no-SDK run divided by five. Run: ``python bench/telemetry.py [--runs N] [--repeats K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from routegate.core import FinalizeRequest, RouteDecision, RouteRequest, RoutingAgent, TicketArgs, telemetry, worker

SPANS_PER_RUN = 5
GOAL = "User Anna (user_id=42) asks: can I get a refund for my pro_monthly subscription charged 10 days ago?"
DECISION = {"kind": "route", "target": "billing", "args": {"ticket": GOAL}}


@worker(args=TicketArgs, inline=True)
def billing(ticket: str) -> dict[str, Any]:
    return {"status": "done", "domain": "billing", "result": {"refund_amount_usd": 49.0}}


class Router:
    async def decide(self, request: RouteRequest) -> RouteDecision:
        return RouteDecision(DECISION, "rules", {"billing": 0.9, "technical": 0.2})


class Finalizer:
    async def finalize(self, request: FinalizeRequest) -> str:
        return f"refund {request.observation['result']['refund_amount_usd']} USD"


class DropExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


async def sample(agent: RoutingAgent, runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        await agent.arun(GOAL)
    return (time.perf_counter() - started) / runs * 1e6


async def main(runs: int, repeats: int) -> None:
    agent = RoutingAgent(workers=[billing], router=Router(), finalizer=Finalizer())
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    exporting = TracerProvider()
    exporting.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=65_536))
    variants: dict[str, TracerProvider | None] = {
        "no SDK (library default)": None,
        "SDK, sampler always_off": unsampled,
        "SDK + batch exporter (all spans recorded)": exporting,
    }
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(repeats):
        for name, provider in variants.items():
            telemetry.use_tracer_provider(provider)
            await sample(agent, runs // 10)  # warm
            best[name] = min(best[name], await sample(agent, runs))
    telemetry.use_tracer_provider(None)
    exporting.shutdown()
    base = best["no SDK (library default)"]
    print(f"Python {platform.python_version()}, {runs} runs per sample, best of {repeats}, interleaved")
    print(f"{'variant':<44} {'µs/run':>8} {'+µs/run':>8} {'µs/span':>8}")
    for name, value in best.items():
        extra = value - base
        print(f"{name:<44} {value:8.2f} {extra:8.2f} {extra / SPANS_PER_RUN:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5_000, help="runs per timing sample (default 5000)")
    parser.add_argument("--repeats", type=int, default=5, help="samples per variant; the best is kept (default 5)")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.repeats))
