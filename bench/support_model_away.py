"""What a configured but unreachable chat model costs a turn: the desk with no model against the desk whose model
sits at a closed loopback port (``OPENAI_BASE_URL=http://127.0.0.1:<closed>/v1``), same database, same messages.

The first turn of the away desk pays one refused connection (no retries); its breaker then stays open for
``ROUTEGATE_LLM_BREAKER_SECONDS`` and every later turn is answered offline without a connection attempt. Reported:
the first turn's latency, the median and p90 of the later turns for both desks, the added latency (away − offline
medians), and the connection attempts counted below the SDK.

Run: python bench/support_model_away.py [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from routegate.apps.support.db import EmbeddedPostgres, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import FittedSemanticLayer
from routegate.embed import MiniLMEncoder
from routegate.llm import OpenAIChatModel
from routegate.testing.network import CountingTransport, closed_port

MESSAGES = (
    "What is the status of ticket 1?",
    "How do I reset my password?",
    "What's the weather today?",
    "hello there",
    "Show tickets for customer John",
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(turns: int, workdir: Path) -> None:
    server = EmbeddedPostgres(workdir / "pg")
    url = server.start()
    encoder = MiniLMEncoder()
    encoder.warm_up()
    fitted = FittedSemanticLayer.load_or_fit(encoder, workdir)
    db = SupportDatabase(url, schema=f"bench_{uuid.uuid4().hex[:8]}", max_size=4)
    await db.open()
    transport = CountingTransport()
    model = OpenAIChatModel(
        model="m", api_key="sk-x", base_url=f"http://127.0.0.1:{closed_port()}/v1", transport=transport
    )
    try:
        offline = SupportAgent(db=db, encoder=encoder, semantic=fitted)
        await offline.start()
        away = SupportAgent(db=db, encoder=encoder, semantic=fitted, chat_model=model)
        await away.start()
        for message in MESSAGES:  # warm both (the encoder, the pool, the statement cache)
            await offline.ask(message, session_id="warm")
        started = time.perf_counter()
        first = await away.ask(MESSAGES[0], session_id="away-first")
        first_ms = (time.perf_counter() - started) * 1000
        attempts_after_first = transport.attempts
        times: dict[str, list[float]] = {"offline": [], "away": []}
        same = 0
        for n in range(turns):
            message = MESSAGES[n % len(MESSAGES)]
            for name, desk in (("offline", offline), ("away", away)):
                started = time.perf_counter()
                result = await desk.ask(message, session_id=f"{name}-{n}")
                times[name].append((time.perf_counter() - started) * 1000)
                if name == "away":
                    same += result.fallback == "llm_unavailable"
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        print(
            f"first turn with the model away: {first_ms:.1f} ms ({first.fallback}), connection attempts: "
            f"{attempts_after_first}"
        )
        for name, values in times.items():
            print(f"{name:8} {turns} turns: median {statistics.median(values):.1f} ms, p90 {pct(values, 0.9):.1f} ms")
        added = statistics.median(times["away"]) - statistics.median(times["offline"])
        print(f"added latency with the breaker open (median): {added:+.1f} ms")
        print(f"connection attempts during the {turns} breaker-open turns: {transport.attempts - attempts_after_first}")
        print(f"turns marked llm_unavailable: {same}/{turns}")
    finally:
        await model.aclose()
        await db.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(run(args.turns, Path(workdir)))


if __name__ == "__main__":
    main()
