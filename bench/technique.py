#!/usr/bin/env python3
"""Technique-router classification throughput: a realistic mix, adversarial input, and linearity in size.

    .venv/bin/python bench/technique.py                      # defaults: the test corpus, ~0.3 s per figure
    .venv/bin/python bench/technique.py --corpus my.jsonl --seconds 1
    .venv/bin/python bench/technique.py --dispatch-only      # only the dispatch figures (last section)
    .venv/bin/python bench/technique.py --dispatch-only --cpu  # the same, in CPU time, inside one event loop

Side by side with a *naive regex classifier* — the usual few lines (non-greedy ``(.*?)`` over the whole text
for fences and ``<tool_call>`` tags) — since none of the peer libraries (LangGraph, lazybridge,
semantic-router) classifies an agent's output into prose / code / tool call / A2A. The naive one is measured
for speed and for agreement with the corpus's expected kinds; on adversarial input it is only run on small
sizes, because its time grows with the square of the size.

Figures: MB/s of UTF-8 input. The realistic mix is every corpus output wrapped in one to eight paragraphs of
ordinary answer prose (agent answers are longer than the terse corpus items); the bare corpus is reported too.
Every adversarial shape here is also in the test suite's one-second check (tests/technique).

Dispatch figures: µs per ``adispatch`` — one core ``GovernedStep`` per part (policy boundary, gateway, result
check, trace entry) under one ``RunContext`` — to an in-process worker that does nothing (so the figure is the
governance cost: checks, bounds, hashing, all-or-none), and the time to refuse hostile arguments (deep, wide,
large) — which must not depend on how hostile they are. With ``--cpu`` each figure is the CPU time
(``time.process_time``, which other processes on a loaded machine do not inflate) of a batch of dispatches awaited
inside one running event loop (no ``run_until_complete`` per dispatch), best of 40 batches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from routegate.core import Budget, Worker
from routegate.technique import ClassifiedOutput, OutputKind, TechniqueDispatcher, TechniqueRouter
from routegate.technique._scan import marker_line_limit
from routegate.technique.types import A2ARoutingRequest, TechniqueItem, ToolCallRequest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "tests" / "technique" / "data" / "corpus.jsonl"
MB = 1_000_000

PARAGRAPHS = [
    "Thanks for the details. I looked at the order history for the account and the charge on the 3rd matches "
    "the renewal of the annual plan; the earlier charge was the prorated upgrade from the monthly plan.",
    "The short answer is yes: the refund window for annual plans is 14 days from the renewal date, and you are "
    "on day 10, so the full amount can be returned to the original payment method.",
    "Before changing the configuration, make sure the service is drained: new requests should go to the other "
    "replica, and the in-flight ones need up to thirty seconds to finish.",
    "I compared the two approaches. The first keeps the index in memory and is faster for small collections; "
    "the second pages from disk and degrades more gracefully once the data no longer fits in RAM.",
    "Here is what I found in the logs: the worker restarted three times between 02:10 and 02:25, each time "
    "after the health check timed out, which points at the database connection pool being exhausted.",
    "If you need the report in another format, I can export it as CSV or as a PDF with the charts included. "
    "Let me know which columns matter most and I will reorder them.",
    "Note that the numbers above are rounded to two decimals, so the totals may differ by a cent from what the "
    "invoice shows. The invoice is the authoritative figure.",
    "Summary: the migration is safe to run during business hours, it takes about four minutes on the current "
    "data volume, and it can be rolled back with the down script if anything looks wrong.",
]


# -- the naive peer ------------------------------------------------------------------------------------------------

_NAIVE_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_NAIVE_TOOL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_NAIVE_A2A = re.compile(r"```a2a\n(.*?)```", re.S)
_NAIVE_LANGS = {"python", "py", "bash", "sh", "javascript", "js"}


def naive_classify(text: str) -> str:
    """The common quick implementation: non-greedy regexes over the whole text, first match wins."""
    if _NAIVE_A2A.search(text):
        return "a2a_request"
    for body in _NAIVE_TOOL.findall(text):
        try:
            json.loads(body)
            return "tool_call"
        except (ValueError, RecursionError):  # RecursionError: found by the corpus's deep-nesting case
            pass
    for language, _ in _NAIVE_FENCE.findall(text):
        if language.lower() in _NAIVE_LANGS:
            return "code_block"
    return "prose"


# -- inputs ---------------------------------------------------------------------------------------------------------


def load_corpus(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def realistic_mix(cases: list[dict[str, object]], seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    outputs = []
    for case in cases:
        before = rng.sample(PARAGRAPHS, rng.randint(0, 4))
        after = rng.sample(PARAGRAPHS, rng.randint(1, 4))
        outputs.append("\n\n".join([*before, str(case["text"]), *after]))
    return outputs


def fill(unit: str, size: int) -> str:
    return unit * (size // len(unit) + 1)


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unterminated fence openers": lambda n: fill("```python\n", n),
    "open/close code pairs": lambda n: fill("```python\nx\n```\n", n),
    "bare fences": lambda n: fill("```\n", n),
    "tool-call openers, no closer": lambda n: fill("<tool_call>\n", n),
    "closer/opener pairs": lambda n: fill("</tool_call>\n<tool_call>\n", n),
    "deep JSON in a tag": lambda n: "<tool_call>" + "[" * n,
    "one giant backtick run": lambda n: "`" * n,
    "long indentation": lambda n: " " * n + "```python",
    "newlines only": lambda n: "\n" * n,
    "inline triple backticks": lambda n: fill("```a``` ", n),
    # dense fence lines: each costs a regex search and some Python, so these stop at the marker-line bound
    "untagged fences with content": lambda n: fill("```\nx\n```\n", n),
    "data fences": lambda n: fill("```yaml\nx\n```\n", n),
    "bare tilde fences": lambda n: fill("~~~\n", n),
    "inline fences, one per line": lambda n: fill("```a```\n", n),
    "short closers under a long opener": lambda n: "````python\n" + fill("```\n", n),
}


# -- measuring ------------------------------------------------------------------------------------------------------


def best_seconds(fn: Callable[[], object], budget: float, rounds: int = 5) -> float:
    """Best-of time for one call of ``fn``, spending about ``budget`` seconds in all."""
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < rounds or (time.perf_counter() < deadline and len(times) < 50):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
        if time.perf_counter() > deadline and len(times) >= 1 and times[-1] > budget:
            break
    return min(times)


def mb_per_second(texts: list[str], classify: Callable[[str], object], budget: float) -> tuple[float, float]:
    size = sum(len(text.encode("utf-8")) for text in texts)

    def run() -> None:
        for text in texts:
            classify(text)

    seconds = best_seconds(run, budget)
    return size / seconds / MB, len(texts) / seconds


# -- dispatch -------------------------------------------------------------------------------------------------------


class _NullHandler:
    """Tool calls (``mcp:<server>/<tool>``) and A2A requests (``a2a:<agent>``) to an inline worker that does nothing."""

    def __init__(self, kind: OutputKind, prefix: str) -> None:
        self.kind, self.prefix = kind, prefix

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, object]]:
        if isinstance(item, ToolCallRequest):
            return f"mcp:{item.qualified_name}", dict(item.arguments)
        assert isinstance(item, A2ARoutingRequest)
        return f"a2a:{item.target_agent}", {"task": item.task_description, "context": dict(item.context)}

    def schema(self, target: str) -> None:
        return None

    def worker(self, target: str) -> Worker:
        def done(**args: object) -> str:
            return "ok"

        return Worker(name=target, fn=done, inline=True)


def _nested(depth: int) -> dict[str, object]:
    value: object = 1
    for _ in range(depth):
        value = {"k": value}
    return {"k": value}


def _tools(*arguments: dict[str, object]) -> ClassifiedOutput:
    calls = tuple(ToolCallRequest("github", f"tool{i}", args) for i, args in enumerate(arguments))
    return ClassifiedOutput(OutputKind.TOOL_CALL, "", tool_calls=calls)


def _a2a(context: dict[str, object]) -> ClassifiedOutput:
    request = A2ARoutingRequest("reviewer", "Review the change", context)
    return ClassifiedOutput(OutputKind.A2A_REQUEST, "", a2a_requests=(request,))


def cpu_seconds(loop: asyncio.AbstractEventLoop, dispatch: Callable[[], Awaitable[object]], runs: int) -> float:
    """Best-of-40 CPU time of ``runs`` dispatches awaited one after another inside one coroutine, per dispatch."""

    async def batch() -> float:
        best = float("inf")
        for _ in range(40):
            started = time.process_time()
            for _ in range(runs):
                await dispatch()
            best = min(best, time.process_time() - started)
        return best / runs

    return loop.run_until_complete(batch())


def dispatch_figures(seconds: float, cpu: bool = False) -> None:
    allow = [f"mcp:github/tool{i}" for i in range(4)] + ["a2a:reviewer"]
    dispatcher = TechniqueDispatcher(
        handlers=[_NullHandler(OutputKind.TOOL_CALL, "mcp"), _NullHandler(OutputKind.A2A_REQUEST, "a2a")],
        allow=allow,
        budget=Budget(max_delegations=4),
    )
    small = {"repo": "acme/api", "state": "open", "labels": ["bug", "p1"], "limit": 20}
    context = {"pr": 7, "files": [f"src/module_{i}.py" for i in range(20)], "notes": "x" * 600}
    cases: dict[str, ClassifiedOutput] = {
        "1 tool call, 4 small arguments": _tools(small),
        "4 tool calls, 4 small arguments each": _tools(small, small, small, small),
        "A2A request, 1 KB context": _a2a(context),
        "refused: arguments nested 10,000 deep": _tools({"q": _nested(10_000)}),
        "refused: 200,000 keys": _tools({f"k{i}": i for i in range(200_000)}),
        "refused: a 20 MB string": _tools({"q": "x" * 20_000_000}),
    }
    loop = asyncio.new_event_loop()
    clock = "CPU µs per adispatch, inside one event loop" if cpu else "µs per adispatch"
    print(f"\ndispatch: {clock} (in-process worker that does nothing; the governance cost)\n")
    print("| output | µs | stop reason |")
    print("|---|---:|---|")
    for name, classified in cases.items():
        try:
            result = loop.run_until_complete(dispatcher.adispatch(classified))
        except Exception as exc:  # the code before the bounds raised here
            print(f"| {name} | — | raised {type(exc).__name__} |")
            continue
        runs = 1 if name.startswith("refused") else 200
        if cpu:
            per_dispatch = cpu_seconds(loop, partial(dispatcher.adispatch, classified), 5 if runs == 1 else runs)
        else:
            batch = best_seconds(
                lambda c=classified, n=runs: [loop.run_until_complete(dispatcher.adispatch(c)) for _ in range(n)],
                seconds,
            )
            per_dispatch = batch / runs
        print(f"| {name} | {per_dispatch * 1e6:,.1f} | {result.stop_reason} |")
    loop.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with 'text' and 'kind'")
    parser.add_argument("--seconds", type=float, default=0.3, help="time budget per figure (default 0.3)")
    parser.add_argument("--dispatch-only", action="store_true", help="only the dispatch figures")
    parser.add_argument("--cpu", action="store_true", help="dispatch figures in CPU time, inside one event loop")
    args = parser.parse_args(argv)
    if args.dispatch_only:
        print(f"python {sys.version.split()[0]}")
        dispatch_figures(args.seconds, args.cpu)
        return 0
    router = TechniqueRouter()
    cases = load_corpus(args.corpus)
    mix = realistic_mix(cases)
    print(f"python {sys.version.split()[0]}; corpus {args.corpus.name}: {len(cases)} outputs")
    print(f"realistic mix: {len(mix)} outputs, mean {statistics.mean(len(t.encode()) for t in mix):.0f} bytes\n")

    agree_ours = sum(router.classify(str(c["text"])).kind.value == c["kind"] for c in cases)
    agree_naive = sum(naive_classify(str(c["text"])) == c["kind"] for c in cases)
    print("kind agreement with the corpus: technique router", f"{agree_ours}/{len(cases)}", end="; ")
    print(f"naive regex {agree_naive}/{len(cases)}\n")

    print("| input | technique router MB/s | outputs/s | naive regex MB/s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, texts in (("realistic mix", mix), ("bare corpus", [str(c["text"]) for c in cases])):
        ours, per_second = mb_per_second(texts, router.classify, args.seconds)
        naive, _ = mb_per_second(texts, naive_classify, args.seconds)
        print(f"| {name} | {ours:.1f} | {per_second:,.0f} | {naive:.1f} | {ours / naive:.2f}x |")

    print("\nadversarial input, 1 MB each (technique router):\n")
    print("| input | ms per MB | MB/s | kind, first problem |")
    print("|---|---:|---:|---|")
    for name, build in ADVERSARIAL.items():
        text = build(MB)
        seconds = best_seconds(partial(router.classify, text), args.seconds, rounds=3)
        result = router.classify(text)
        why = f"{result.kind.value}, {result.problems[0] if result.problems else '—'}"
        print(f"| {name} | {seconds * 1000:.1f} | {len(text) / seconds / MB:.1f} | {why} |")

    print("\nthe worst case by size: bare fences, 4 characters per fence line (over the line bound from ~1.4 KB)\n")
    print("| size | fence lines | lines examined | ms | MB/s | µs per line examined |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000):
        text = ADVERSARIAL["bare fences"](size)[:size]
        seconds = best_seconds(partial(router.classify, text), args.seconds, rounds=5)
        lines = text.count("\n")
        examined = min(lines, marker_line_limit(size) + 1)
        print(
            f"| {size / 1000:,.0f} KB | {lines:,} | {examined:,} | {seconds * 1000:.2f} | {size / seconds / MB:.1f} "
            f"| {seconds / examined * 1e6:.2f} |"
        )

    print("\nlinearity: time per size, and time(size) / time(size / 2)\n")
    print("| input | size | technique router ms | ratio | naive regex ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    # no block worth keeping (a document with hundreds of calls stops early as prose): the scan runs to the end
    document = "\n\n".join(
        [*PARAGRAPHS, "Use `pip install -e .` first.", "```yaml\nretries: 3\ntimeout: 30\n```", "```\n$ make\nok\n```"]
    )
    linear_inputs: dict[str, Callable[[int], str]] = {
        "realistic prose + data fences": lambda n: fill(document + "\n\n", n)[:n],
        "tool-call openers, no closer": ADVERSARIAL["tool-call openers, no closer"],
        "unterminated fence openers": ADVERSARIAL["unterminated fence openers"],
        "bare fences (stop at the line bound)": ADVERSARIAL["bare fences"],
    }
    for name, build in linear_inputs.items():
        previous_ours = previous_naive = None
        for size in (125_000, 250_000, 500_000, 1_000_000, 2_000_000):
            text = build(size)
            ours = best_seconds(partial(router.classify, text), args.seconds, rounds=3)
            naive_cell = ratio_naive = "—"
            if size <= 250_000 or name.startswith("realistic"):
                naive = best_seconds(partial(naive_classify, text), args.seconds, rounds=1)
                naive_cell = f"{naive * 1000:.1f}"
                ratio_naive = f"{naive / previous_naive:.2f}" if previous_naive else ""
                previous_naive = naive
            ratio = f"{ours / previous_ours:.2f}" if previous_ours else ""
            previous_ours = ours
            print(f"| {name} | {size / MB:.3f} MB | {ours * 1000:.1f} | {ratio} | {naive_cell} | {ratio_naive} |")
    dispatch_figures(args.seconds, args.cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
