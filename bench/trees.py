"""Before/after on one machine in one run: a bench script on two source trees, alternately, round after round.

    python bench/trees.py --before ../main --rounds 3 -- bench/plan_overhead.py --runs 20000

Each round runs the script once in each tree (the tree's own ``.venv/bin/python``, so its own ``routegate``, from the
tree's root; the script is the measured tree's copy, so a bench new to it measures the tree before too), ``before``
first, so both trees meet the same load. Every output line of the form
``<variant> <number> ...`` is a figure; the report gives, per variant, the best of the rounds in each tree and the
change. Lines that are not figures (a ratio sentence, the python version) are printed from the last round of each.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

FIGURE = re.compile(r"^(?P<name>\S.*?)\s+(?P<value>-?\d+(?:\.\d+)?)(?:\s+-?\d+(?:\.\d+)?)*\s*$")


def run_tree(tree: Path, script: Path, args: Sequence[str]) -> str:
    python = tree / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), str(script), *args], cwd=tree, capture_output=True, text=True, check=True, timeout=7200
    )
    return done.stdout


def figures(output: str) -> tuple[dict[str, float], list[str]]:
    found: dict[str, float] = {}
    other: list[str] = []
    for line in output.splitlines():
        match = FIGURE.match(line)
        if match and not line.startswith(("python ", "variant")):
            found[match["name"].strip()] = float(match["value"])
        elif line.strip():
            other.append(line)
    return found, other


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree to compare against (its own .venv)")
    parser.add_argument("--after", type=Path, default=Path("."), help="the tree measured (default: this one)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("script", help="the bench script, relative to each tree's root")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (after --)")
    options = parser.parse_args(argv)
    args = [a for a in options.args if a != "--"]
    trees = {"before": options.before.resolve(), "after": options.after.resolve()}
    best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
    order: dict[str, None] = {}
    last: dict[str, list[str]] = defaultdict(list)
    for _ in range(options.rounds):
        for side, tree in trees.items():
            found, other = figures(run_tree(tree, trees["after"] / options.script, args))
            last[side] = other
            for name, value in found.items():
                order[name] = None
                best[side][name] = min(value, best[side].get(name, value))
    print(f"{options.script} {' '.join(args)}: best of {options.rounds} alternating rounds")
    print(f"{'variant':50} {'before':>10} {'after':>10} {'change':>8}")
    for name in order:
        before, after = best["before"].get(name), best["after"].get(name)
        change = f"{(after / before - 1) * 100:+.0f} %" if before and after else ""
        cells = [f"{v:10.2f}" if v is not None else f"{'-':>10}" for v in (before, after)]
        print(f"{name:50} {cells[0]} {cells[1]} {change:>8}")
    for side in ("before", "after"):
        for line in last[side]:
            if not line.startswith(("python ", "variant")):
                print(f"{side}: {line}")


if __name__ == "__main__":
    sys.exit(main())
