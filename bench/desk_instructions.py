"""Exact CPU instructions of one support-desk turn, by message: the desk's process under callgrind, counting only
while the measured turns run (instrumentation off for the start, the warm-up turns and between messages).

    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p \\
        .venv/bin/python bench/desk_instructions.py --turns 40
    grep -H -E '^(desc: Trigger|totals)' /tmp/cg.*      # totals / turns = instructions per turn

Each message's turns are one dump (``desc: Trigger: dump <message's route>``). PostgreSQL is another process (not
counted); the encoder's thread is (a VECTOR turn's pass). One turn at a time, eight sessions per message, after
16 warm turns. The count moves by 1-2 % from run to run (the pool's and the garbage collector's timing), not with
the machine's load: compare trees with it (``PYTHONPATH=<tree>/src``) where timings are noise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from desk_cost import offline_desk
from routegate.apps.support.db import EmbeddedPostgres

MESSAGES = {
    "POSTGRES": "What is the status of ticket 2?",
    "VECTOR": "How do I reset my password?",
    "EXTERNAL": "What's the weather today?",
    "LLM": "Can you help me?",
    "CITY": "Which city does customer 1 live in?",
}


def callgrind(*args: str) -> None:
    """Tell the callgrind running this process (``callgrind_control``)."""
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


async def main_async(turns: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="routegate-bench-instr-"))
    server = EmbeddedPostgres(workdir / "pg")
    try:
        url = server.start()
        async with offline_desk(url, workdir) as (_, desk):
            for name, message in MESSAGES.items():
                run = uuid.uuid4().hex[:8]
                for i in range(16):
                    await desk.ask(message, session_id=f"instr-{run}-{i % 8}")
                await asyncio.sleep(0.1)  # the last session lock's release has gone
                callgrind("--zero")
                callgrind("--instr=on")
                for i in range(turns):
                    await desk.ask(message, session_id=f"instr-{run}-{i % 8}")
                callgrind("--instr=off")
                callgrind(f"--dump={name}")
                print(f"{name}: {turns} turns dumped")
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40, help="measured turns per message (default 40)")
    asyncio.run(main_async(parser.parse_args().turns))


if __name__ == "__main__":
    main()
