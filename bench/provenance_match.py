"""The provenance matcher's own cost: one flow-rule check with a fresh ledger (the request of bench/core_overhead.py as
``user`` and one tool output of about 450 characters x 5, with numbers in several formats), CPU time per check.

It isolates what bench/provenance.py's part 2 measures inside a whole run, so that it can be compared between two
trees on a busy machine (CPU time, best of 7 samples). Run: python bench/provenance_match.py [--checks N]
"""

from __future__ import annotations

import argparse
import time
from typing import Annotated

from core_overhead import GOAL
from routegate.core import From, ProvenanceLedger, Worker, WorkerArgs

OUTPUT = {
    "status": "open",
    "summary": "Customer reports login failure since 3 March, 2 attempts, order 1,041 total 99.50 EUR. " * 5,
}


class Args(WorkerArgs):
    ticket: Annotated[str, From("user")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=3_000, help="checks per sample (default 3000)")
    args = parser.parse_args()
    rules = Worker("lookup", lambda ticket: None, args_model=Args).flow_rules
    assert rules is not None

    def one() -> None:
        ledger = ProvenanceLedger.of_request(GOAL)
        ledger.record_tool("lookup", OUTPUT)
        assert rules.check({"ticket": "T-1042"}, ledger).refusal is not None  # matched against both sources

    for _ in range(200):
        one()
    samples = []
    for _ in range(7):
        started = time.process_time()
        for _ in range(args.checks):
            one()
        samples.append((time.process_time() - started) / args.checks * 1e6)
    samples.sort()
    print(f"flow-rule check, fresh ledger: best {samples[0]:.1f} CPU µs, median {samples[3]:.1f}")


if __name__ == "__main__":
    main()
