"""Follow-ups across turns: the share of turns the desk answers right on the multi-turn set
(``tests/data/support_followups.jsonl``: follow-ups that must carry over what earlier turns established, and topic
changes that must not), offline and with a chat model (the scripted OpenAI-compatible server on loopback, answering
from the prompts alone: ``tests/support/followup_cases.py``).

A turn is right when it takes the expected route, its answer holds every expected string and none of the rejected
ones. Run it on a checkout without follow-up resolution for the "before" figure (``PYTHONPATH=<that>/src``):
the script uses only the desk's public entry points.

Run: python bench/support_followups.py [--layer fitted|example] [--model] [--show-failures]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import routegate
from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import EmbeddingLayer, ExampleEmbeddingLayer, FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.llm.openai_chat import OpenAIChatModel
from routegate.testing import ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
# the cases module of the tests, by path (this directory's support.py would shadow the tests' ``support`` package)
_spec = importlib.util.spec_from_file_location("followup_cases", ROOT / "tests" / "support" / "followup_cases.py")
assert _spec is not None and _spec.loader is not None
cases = importlib.util.module_from_spec(_spec)
sys.modules["followup_cases"] = cases
_spec.loader.exec_module(cases)
conversations, model_responder, problems = cases.conversations, cases.model_responder, cases.problems


def pct(hit: int, total: int) -> str:
    return f"{100.0 * hit / total:.1f} % ({hit}/{total})" if total else "-"


async def run(url: str, layer: EmbeddingLayer, encoder: MiniLMEncoder, *, model: bool, show: bool) -> None:
    schema = f"f_{uuid.uuid4().hex[:12]}"
    server = ScriptedOpenAIServer(fallback=model_responder).start() if model else None
    chat_model = (
        OpenAIChatModel(model=server.model, api_key=server.api_key, base_url=server.base_url, max_retries=0)
        if server is not None
        else None
    )
    db = SupportDatabase(url, schema=schema, max_size=2)
    await db.open()
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    whole = 0
    convs = conversations()
    started = time.perf_counter()
    try:
        desk = SupportAgent(db=db, encoder=encoder, semantic=layer, chat_model=chat_model)
        await desk.start()
        for conv in convs:
            all_right = True
            for index, turn in enumerate(conv.turns):
                result = await desk.ask(turn.text, session_id=f"{conv.id}-{schema}")
                kind = "first turn" if turn.carry is None else "follow-up" if turn.carry else "topic change"
                wrong = problems(turn, result.route, result.answer)
                for key in (kind, "all", f"{conv.split} split"):
                    total[key] += 1
                    right[key] += not wrong
                if wrong:
                    all_right = False
                    if show:
                        print(f"  {conv.id}#{index + 1} {turn.text!r}: {'; '.join(wrong)}\n    → {result.answer!r}")
            whole += all_right
    finally:
        async with db.connection() as conn:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await db.close()
        if chat_model is not None:
            await chat_model.aclose()
        if server is not None:
            server.close()
    took = time.perf_counter() - started
    print(f"{'with the scripted model' if model else 'offline'} ({routegate.__file__}):")
    for kind in ("all", "dev split", "test1 split", "test2 split", "first turn", "follow-up", "topic change"):
        print(f"  turns {kind:13} {pct(right[kind], total[kind]):>20}")
    print(f"  conversations all right {pct(whole, len(convs)):>12}   ({took:.1f} s)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layer", choices=("fitted", "example"), default="fitted")
    parser.add_argument("--model", action="store_true", help="also run with the scripted OpenAI-compatible server")
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args()
    encoder = MiniLMEncoder()
    encoder.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        layer: EmbeddingLayer = (
            FittedSemanticLayer.load_or_fit(encoder, Path(tmp))
            if args.layer == "fitted"
            else ExampleEmbeddingLayer(encoder)
        )
        pg = EmbeddedPostgres(Path(tmp) / "pg")
        url = pg.start()
        try:
            await run(url, layer, encoder, model=False, show=args.show_failures)
            if args.model:
                await run(url, layer, encoder, model=True, show=args.show_failures)
        finally:
            pg.stop()


if __name__ == "__main__":
    asyncio.run(main())
