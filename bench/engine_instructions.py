"""Exact CPU instructions of one run of the engine, by variant: the plan of ``bench/plan_overhead.py`` (sync ``run``,
``arun``, async steps, ``routes_by`` with a pydantic output, a budget's timer) and the routing agent of
``bench/core_overhead.py`` (``arun`` and ``run`` with an inline worker, ``arun`` with a worker on a thread).

    python bench/engine_instructions.py [--runs N]

runs itself under callgrind (``valgrind`` must be installed), counting only while a variant's measured runs run
(instrumentation off for the start and the warm-up runs), and prints instructions per run. The count moves by a
fraction of a percent from run to run, not with the machine's load: compare trees with it where timings are noise
(``python bench/trees.py --before <tree> --rounds 1 bench/engine_instructions.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
WARM = 50


def _bench(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_bench", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations there
    spec.loader.exec_module(module)
    return module


def _callgrind(*args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


def _variants() -> dict[str, tuple[Callable[[Any], Any], Sequence[Any], bool]]:
    """Per variant: the call, its inputs (rotated) and whether it is awaited."""
    from routegate.core import Budget

    plan, core = _bench("plan_overhead"), _bench("core_overhead")
    form_a, form_b = plan.routegate_form_a(), plan.routegate_form_b()
    async_steps = plan.routegate_form_a(use_async=True)
    budgeted = plan.routegate_form_a(use_async=True, budget=Budget(max_seconds=60))
    inline, threaded = core.build_agent(inline=True), core.build_agent(inline=False)
    return {
        "plan run, sync": (form_a.run, plan.INPUTS, False),
        "plan arun": (form_a.arun, plan.INPUTS, True),
        "plan arun, async steps": (async_steps.arun, plan.INPUTS, True),
        "plan run, routes_by + pydantic output": (form_b.run, plan.INPUTS, False),
        "plan arun, async steps + budget": (budgeted.arun, plan.INPUTS, True),
        "agent arun, inline worker": (inline.arun, [core.GOAL], True),
        "agent run, sync, inline worker": (inline.run, [core.GOAL], False),
        "agent arun, worker on a thread": (threaded.arun, [core.GOAL], True),
    }


def child(runs: int) -> None:
    """Under callgrind: each variant's measured runs are one dump, named by the variant."""
    for name, (call, inputs, awaited) in _variants().items():
        if awaited:

            async def loop(call: Callable[[Any], Awaitable[Any]] = call, inputs: Sequence[Any] = inputs) -> None:
                for i in range(WARM):
                    await call(inputs[i % len(inputs)])
                _callgrind("-i", "on")
                for i in range(runs):
                    await call(inputs[i % len(inputs)])
                _callgrind("-i", "off")

            asyncio.run(loop())
        else:
            for i in range(WARM):
                call(inputs[i % len(inputs)])
            _callgrind("-i", "on")
            for i in range(runs):
                call(inputs[i % len(inputs)])
            _callgrind("-i", "off")
        _callgrind("-d", name)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="measured runs per variant (default 2000)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        child(options.runs)
        return
    with tempfile.TemporaryDirectory() as where:
        out = Path(where) / "cg.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                "--runs",
                str(options.runs),
            ],
            check=True,
            capture_output=True,
        )
        counts: dict[str, int] = {}
        for dump in sorted(Path(where).glob("cg.out.*"), key=lambda path: int(path.suffix[1:])):
            text = dump.read_text(errors="replace")
            trigger = re.search(r"^desc: Trigger: dump (.+)$", text, re.M)
            total = re.search(r"^totals: (\d+)", text, re.M)
            if trigger and total:
                counts[trigger[1].strip()] = int(total[1])
    print(f"instructions per run, {options.runs} runs per variant (callgrind)")
    print(f"{'variant':50} {'instructions':>12}")
    for name, total in counts.items():  # in the order they ran
        print(f"{name:50} {total / options.runs:12.0f}")


if __name__ == "__main__":
    main()
