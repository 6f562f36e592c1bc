"""The router's "I don't know" gate: routing accuracy before and after it, on the labelled set of messages it is
for (``tests/data/support_unsure.jsonl``: other languages, pasted SQL and code, gibberish, unknown names, and
in-scope controls) and on the held-out routing set (``tests/data/support_routes.jsonl``), and the margin
threshold tuned on the validation splits (``val`` and ``dev``).

"Before" is the cascade alone (rules → embedding layer → default); "after" adds the gate (pasted SQL/code before
any stage; a non-English message or a margin under the threshold on the embedding layer's decision → the LLM
route's clarifying answer). Both embedding layers: the fitted one (the product's) and the thin one (the tests').

Run: python bench/support_unsure.py [--tune]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from routegate.apps.support.router import RouteChoice, SupportRouter, _as_route_choice
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MiniLMEncoder

ROOT = Path(__file__).resolve().parents[1]
UNSURE = ROOT / "tests" / "data" / "support_unsure.jsonl"
ROUTES = ROOT / "tests" / "data" / "support_routes.jsonl"
GRID = [round(0.01 * i, 2) for i in range(41)]


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def ungated(router: SupportRouter, items: list[dict[str, Any]]) -> list[RouteChoice]:
    return [_as_route_choice(await router.choose(router.request_for(r["text"]))) for r in items]


def accuracy(items: list[dict[str, Any]], routes: list[str], split: str | None = None) -> tuple[int, int]:
    pairs = [(r, got) for r, got in zip(items, routes, strict=True) if split is None or r["split"] == split]
    return sum(r["route"] == got for r, got in pairs), len(pairs)


def pct(hit_total: tuple[int, int]) -> str:
    hit, total = hit_total
    return f"{100.0 * hit / total:.1f} % ({hit}/{total})"


async def evaluate(name: str, layer: EmbeddingLayer, tune: bool) -> None:
    router = SupportRouter(semantic=layer)
    sets = {"unsure": rows(UNSURE), "routes": rows(ROUTES)}
    base = {k: await ungated(router, v) for k, v in sets.items()}

    async def gated(margin: float) -> dict[str, list[str]]:
        router.unsure_margin = margin
        out: dict[str, list[str]] = {}
        for key, items in sets.items():
            out[key] = [(await router.route_choice(r["text"])).route for r in items]
        return out

    print(f"\n## {name} (layer's unsure_margin = {getattr(layer, 'unsure_margin', 0.0)})")
    if tune:
        print("margin  unsure:val  routes:dev")
        for margin in GRID:
            got = await gated(margin)
            u = accuracy(sets["unsure"], got["unsure"], "val")
            d = accuracy(sets["routes"], got["routes"], "dev")
            print(f"{margin:5.2f}  {pct(u):>16}  {pct(d):>16}")
    after = await gated(float(getattr(layer, "unsure_margin", 0.0)))
    before = {k: [c.route for c in v] for k, v in base.items()}
    for key, split in (("unsure", "val"), ("unsure", "test"), ("unsure", None), ("routes", "test"), ("routes", None)):
        label = f"{key}:{split or 'all'}"
        print(
            f"{label:14} before {pct(accuracy(sets[key], before[key], split)):>18}   "
            f"after {pct(accuracy(sets[key], after[key], split)):>18}"
        )
    kinds: Counter[str] = Counter()
    right_before: Counter[str] = Counter()
    right_after: Counter[str] = Counter()
    for r, b, a in zip(sets["unsure"], before["unsure"], after["unsure"], strict=True):
        kinds[r["kind"]] += 1
        right_before[r["kind"]] += r["route"] == b
        right_after[r["kind"]] += r["route"] == a
    for kind in kinds:
        print(f"  {kind:17} before {right_before[kind]}/{kinds[kind]}  after {right_after[kind]}/{kinds[kind]}")
    for r, a in zip(sets["routes"], after["routes"], strict=True):
        if r["route"] != a:
            print(f"  routes miss: {r['text']!r} expected {r['route']} got {a} ({r['split']})")
    for r, a in zip(sets["unsure"], after["unsure"], strict=True):
        if r["route"] != a:
            print(f"  unsure miss: {r['text']!r} expected {r['route']} got {a} ({r['split']})")


async def main_async(tune: bool) -> None:
    encoder = MiniLMEncoder()
    encoder.warm_up()
    with tempfile.TemporaryDirectory() as workdir:
        fitted = FittedSemanticLayer.load_or_fit(encoder, Path(workdir))
    await evaluate("fitted layer (the product's default)", fitted, tune)
    await evaluate("thin layer (ExampleEmbeddingLayer)", ExampleEmbeddingLayer(encoder), tune)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tune", action="store_true", help="print accuracy on the val/dev splits for each margin")
    asyncio.run(main_async(parser.parse_args().tune))


if __name__ == "__main__":
    main()
