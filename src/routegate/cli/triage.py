"""``routegate triage "<request>"``: the routing-agent seed's billing / technical / sales example."""

from __future__ import annotations

import argparse
from typing import Any

from routegate.apps.triage import DEMO_GOAL, build_triage_agent


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "triage",
        help="route a support request to the billing, technical or sales specialist and print the JSON result",
        description="Route a support request to the billing, technical or sales specialist through the policy "
        "boundary and gateway, and print the run result as JSON (status, stop_reason, selected_route, answer, "
        "trace, history). Offline by default; uses the LLM router and finalizer when OPENAI_API_KEY is set.",
    )
    parser.add_argument("request", nargs="?", default=DEMO_GOAL, help="the request text (default: the seed's goal)")
    parser.add_argument("--compact", action="store_true", help="print the JSON on one line")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    agent = build_triage_agent()
    result = agent.run(args.request)
    print(result.to_json(indent=None if args.compact else 2))
    return 0 if result.ok else 1
