"""What OpenTelemetry costs a governed run and a Plan run: no SDK (the library default) vs the SDK.

One process, interleaved sample by sample, the best of ``--repeats`` samples of ``--runs`` runs each:

* **agent** — the same ``RoutingAgent`` run as ``bench/core_overhead.py`` (scripted router, inline worker,
  trivial finalizer), which opens five spans (run, route, policy, delegate, finalize):

  * no SDK (nothing installed a tracer provider: routegate opens no span);
  * the SDK with the ``always_off`` sampler (spans are created, nothing is recorded);
  * the SDK with a ``BatchSpanProcessor`` whose exporter drops each batch (routegate's and the SDK's cost, not a
    network's);
  * the same, with an exporter that encodes each batch as OTLP protobuf — what ``routegate serve``'s exporter does
    on its thread before it sends (``--no-otlp`` leaves it out).

* **bare SDK** — the same tree of five spans with nothing else running: the floor the SDK sets.

  * the API's usual idiom (``start_as_current_span``), no attributes;
  * routegate's way (:func:`routegate.core.telemetry.span`: ``start_span`` and one context attach), no attributes;
  * routegate's way with the attributes a governed run records (the same keys and values).

* **Plan** — ``classify → branch → rejoin`` (``bench/plan_overhead.py``'s form A): a plan span and three step
  spans per run, no SDK vs the SDK and the dropping batch exporter.

Per span: the cost over the same run without an SDK, divided by the spans a run opens. Run:
``python bench/telemetry.py [--runs N] [--repeats K] [--no-otlp]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Tracer

from routegate.core import FinalizeRequest, RouteDecision, RouteRequest, TicketArgs, telemetry, worker
from routegate.core.telemetry import Attr, span
from routegate.plan import Plan, RoutingAgent, Step, when

AGENT_SPANS = 5
PLAN_SPANS = 4  # the plan and its three steps
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


class EncodeExporter(SpanExporter):
    """Encodes each batch as the OTLP/HTTP exporter does (protobuf), then drops it."""

    def __init__(self) -> None:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        self.encode = encode_spans
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.bytes += len(self.encode(spans).SerializePartialToString())
        return SpanExportResult.SUCCESS


def triage_plan() -> Plan:
    return Plan(
        Step(
            lambda text: {"severity": "urgent" if "refund" in text else "normal"},
            name="classify",
            routes={
                "urgent": when.field("severity").equals("urgent"),
                "normal": when.field("severity").equals("normal"),
            },
            after_branches="archive",
        ),
        Step(lambda ticket: "paged", name="urgent"),
        Step(lambda ticket: "backlog", name="normal"),
        Step(lambda outcome: f"archived: {outcome}", name="archive"),
    )


# -- the bare SDK: the agent's tree of five spans, and nothing else -------------------------------------------------
def stock_tree(tr: Tracer) -> None:
    with tr.start_as_current_span("routegate.run"):
        for name in ("routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"):
            with tr.start_as_current_span(name):
                pass


def helper_tree(tr: Tracer) -> None:
    with span(tr, "routegate.run"):
        for name in ("routegate.route", "routegate.policy", "routegate.delegate", "routegate.finalize"):
            with span(tr, name):
                pass


def attributed_tree(tr: Tracer) -> None:
    """The attributes of a governed run (same keys, same kinds of values), set where routegate sets them."""
    with span(tr, "routegate.run", {Attr.RUNTIME: "agent", Attr.RUN_ID: "0123456789abcdef"}) as root:
        with span(tr, "routegate.route", {Attr.ATTEMPT: 1}) as routed:
            routed.set_attributes(
                {
                    Attr.ROUTER_LAYER: "rules",
                    Attr.ROUTER_SCORE: 0.9,
                    Attr.ROUTER_MARGIN: 0.7,
                    Attr.ROUTER_RUNNER_UP: "technical",
                }
            )
        with span(tr, "routegate.policy", {Attr.ATTEMPT: 1}) as checked:
            checked.set_attribute(Attr.TARGET, "billing")
        with span(
            tr, "routegate.delegate", {Attr.ATTEMPT: 1, Attr.TARGET: "billing", Attr.ARGS_HASH: "9" * 16}
        ) as done:
            done.set_attribute(Attr.OBSERVATION_STATUS, "done")
        with span(tr, "routegate.finalize"):
            pass
        root.set_attributes({Attr.ROUTE: "billing", Attr.ATTEMPTS: 1, Attr.DELEGATIONS: 1, Attr.STOP_REASON: "success"})


async def sample(run: Callable[[], Awaitable[Any]], runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        await run()
    return (time.perf_counter() - started) / runs * 1e6


def as_async(fn: Callable[[Tracer], None], tr: Tracer) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        fn(tr)

    return run


async def main(runs: int, repeats: int, otlp: bool) -> None:
    agent = RoutingAgent(workers=[billing], router=Router(), finalizer=Finalizer())
    plan = triage_plan()
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    exporting = TracerProvider()
    exporting.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=65_536))
    encoding = TracerProvider()
    encoder = EncodeExporter() if otlp else None
    if encoder is not None:
        encoding.add_span_processor(BatchSpanProcessor(encoder, max_queue_size=65_536))
    bare = exporting.get_tracer("bench")

    async def agent_run() -> None:
        await agent.arun(GOAL)

    async def plan_run() -> None:
        await plan.arun(GOAL)

    # (name, provider routegate's spans go to, the run, spans it opens, the row its cost is measured against)
    variants: list[tuple[str, TracerProvider | None, Callable[[], Awaitable[Any]], int, str | None]] = [
        ("agent: no SDK (library default)", None, agent_run, AGENT_SPANS, None),
        ("agent: SDK, sampler always_off", unsampled, agent_run, AGENT_SPANS, "agent: no SDK (library default)"),
        ("agent: SDK + batch, exporter drops", exporting, agent_run, AGENT_SPANS, "agent: no SDK (library default)"),
    ]
    if encoder is not None:
        variants.append(
            ("agent: SDK + batch, OTLP-encoding", encoding, agent_run, AGENT_SPANS, "agent: no SDK (library default)")
        )
    variants += [
        ("bare SDK: start_as_current_span, no attrs", None, as_async(stock_tree, bare), AGENT_SPANS, ""),
        ("bare SDK: routegate's span(), no attrs", None, as_async(helper_tree, bare), AGENT_SPANS, ""),
        ("bare SDK: routegate's span(), its attrs", None, as_async(attributed_tree, bare), AGENT_SPANS, ""),
        ("plan: no SDK (library default)", None, plan_run, PLAN_SPANS, None),
        ("plan: SDK + batch, exporter drops", exporting, plan_run, PLAN_SPANS, "plan: no SDK (library default)"),
    ]
    best = {name: float("inf") for name, *_ in variants}
    for _ in range(repeats):
        for name, provider, run, _spans, _base in variants:
            telemetry.use_tracer_provider(provider)
            await sample(run, max(runs // 10, 1))  # warm
            best[name] = min(best[name], await sample(run, runs))
    telemetry.use_tracer_provider(None)
    for provider in (exporting, encoding, unsampled):
        provider.shutdown()
    load = os.getloadavg()[0]
    print(
        f"Python {platform.python_version()}, {runs} runs per sample, best of {repeats}, interleaved, load {load:.1f}"
    )
    print(f"{'variant':<44} {'µs/run':>8} {'+µs/run':>8} {'µs/span':>8}")
    for name, _provider, _run, spans, base in variants:
        value = best[name]
        if base is None:
            print(f"{name:<44} {value:8.2f} {'':>8} {'':>8}")
            continue
        extra = value - best[base] if base else value
        print(f"{name:<44} {value:8.2f} {extra:8.2f} {extra / spans:8.2f}")
    if encoder is not None:
        print(f"(OTLP encoding: {encoder.bytes} bytes encoded in all)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3_000, help="runs per timing sample (default 3000)")
    parser.add_argument("--repeats", type=int, default=5, help="samples per variant; the best is kept (default 5)")
    parser.add_argument("--no-otlp", action="store_true", help="leave out the OTLP-encoding exporter")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.repeats, not args.no_otlp))
