"""Document recall of a desk's knowledge base on paraphrased questions, before and after hybrid retrieval.

For each desk (the built-in demo desk, and the shop example built by ``routegate desk init``), every question of its
paraphrase set (``{"text", "source"}``: the document that answers it, asked in other words) is searched three ways:

* **before** — pgvector similarity only, under the fixed cut-off the desk had (0.40 for the demo desk, the 0.35
  ``desk init`` wrote for the shop);
* **hybrid, fixed cut-off** — full-text search fused with pgvector (reciprocal rank fusion), the same fixed cut-off;
* **after** — hybrid, with the cut-off calibrated from the desk's own documents at ingest.

A question whose ``source`` is ``null`` is one no document answers (``what are your support hours``), like the
shared off-topic set (``{"text"}``): *refused* counts those the search returns nothing for, so a cut-off that lets
everything through shows.

recall@k: the question's document is among the first k passages the search returns (after its cut-off).

Run: python bench/doc_recall.py [--demo PATH] [--shop PATH] [--off-topic PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from unittest import mock

from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.embedded import EmbeddedPostgres
from routegate.apps.support.factory import open_support_desk
from routegate.apps.support.vector_tool import KnowledgeBase, Passage, nearest
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
KS: Final = (1, 3)
_VECTOR_ONLY: Final = (
    "SELECT source, heading, content, 1 - (embedding <=> %(v)s::vector) AS score FROM kb_chunks "
    "ORDER BY embedding <=> %(v)s::vector LIMIT %(k)s"
)

Search = Callable[[str], Awaitable[list[Passage]]]


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def vector_only(desk: SupportAgent, min_score: float) -> Search:
    async def search(text: str) -> list[Passage]:
        found = await nearest(desk.db, desk.encoder, text, _VECTOR_ONLY, 3, what="knowledge search")
        passages = [Passage(r["source"], r["heading"], r["content"], float(r["score"])) for r in found]
        return [p for p in passages if p.score >= min_score]

    return search


async def measure(search: Search, items: list[dict[str, Any]], off_topic: list[dict[str, Any]]) -> dict[str, Any]:
    questions = [q for q in items if q["source"] is not None]
    unanswered = [q for q in items if q["source"] is None] + off_topic
    hits = dict.fromkeys(KS, 0)
    misses: list[str] = []
    timed = 0.0
    for q in questions:
        started = time.perf_counter()
        found = await search(q["text"])
        timed += time.perf_counter() - started
        sources = [p.source for p in found]
        for k in KS:
            hits[k] += q["source"] in sources[:k]
        if q["source"] not in sources[:3]:
            misses.append(q["text"])
    refused = 0
    for q in unanswered:
        found = await search(q["text"])
        refused += not found
        if found:
            misses.append(f"(answered, should not be) {q['text']} -> {found[0].source} {found[0].score:.3f}")
    return {
        **{f"recall@{k}": f"{hits[k]}/{len(questions)} ({100 * hits[k] / len(questions):.0f} %)" for k in KS},
        "unanswerable refused": f"{refused}/{len(unanswered)}",
        "mean search": f"{1000 * timed / len(questions):.1f} ms (encoder included)",
        "missed@3": misses,
    }


async def bench_desk(
    name: str, desk: SupportAgent, fixed: float, questions: list[dict[str, Any]], off_topic: list[dict[str, Any]]
) -> None:
    language = desk.config.knowledge.language
    hybrid_fixed = KnowledgeBase(desk.db, desk.encoder, min_score=fixed, language=language)
    hybrid = KnowledgeBase(desk.db, desk.encoder, min_score=None, language=language)
    cur = None
    async with desk.db.connection() as conn:
        cur = await (await conn.execute("SELECT details FROM kb_calibration")).fetchone()
    print(
        f"\n## {name} ({len(questions)} questions, {len(off_topic)} off-topic); calibration: {cur and cur['details']}"
    )
    for label, search in (
        (f"before: vector only, cut-off {fixed}", vector_only(desk, fixed)),
        (f"hybrid, cut-off {fixed}", lambda t: hybrid_fixed.search(t, 3)),
        ("after: hybrid, calibrated cut-off", lambda t: hybrid.search(t, 3)),
    ):
        result = await measure(search, questions, off_topic)
        missed = result.pop("missed@3")
        print(f"- {label}: " + ", ".join(f"{k} {v}" for k, v in result.items()))
        for text in missed:
            print(f"    missed: {text}")


async def run(args: argparse.Namespace) -> None:
    off_topic = rows(args.off_topic)
    encoder = MiniLMEncoder()
    encoder.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        server = EmbeddedPostgres(base / "pg")
        url = server.start()
        try:
            shutil.copy(ROOT / "examples" / "shop" / "shop.sql", base / "shop.sql")
            shutil.copytree(ROOT / "examples" / "shop" / "docs", base / "docs")
            with mock.patch.dict(os.environ, {"DATABASE_URL": url, "ROUTEGATE_DATA_DIR": str(base)}):
                init = [
                    "desk",
                    "init",
                    str(base / "shop"),
                    "--from-sql",
                    str(base / "shop.sql"),
                    "--kb",
                    str(base / "docs"),
                ]
                if main(init) != 0:
                    raise SystemExit("desk init of the shop example failed")
            settings = Settings(database_url=url, data_dir=base)
            for name, desk_dir, fixed, data in (
                ("demo desk (built-in)", builtin_desk_dir(), 0.40, args.demo),
                ("shop example", base / "shop", 0.35, args.shop),
            ):
                async with open_support_desk(settings, desk_dir, encoder=encoder) as desk:
                    await bench_desk(name, desk, fixed, rows(data), off_topic)
        finally:
            server.stop()


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", type=Path, default=DATA / "doc_paraphrases_demo.jsonl")
    parser.add_argument("--shop", type=Path, default=DATA / "doc_paraphrases_shop.jsonl")
    parser.add_argument("--off-topic", type=Path, default=DATA / "doc_off_topic.jsonl")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main_()
