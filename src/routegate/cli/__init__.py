"""``routegate`` command line: each subcommand lives in its own module with a ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from routegate import __version__

# Each module defines register(subparsers) and sets a handler with parser.set_defaults(handler=...).
COMMAND_MODULES: tuple[str, ...] = (
    "routegate.cli.triage",
    "routegate.cli.support",
    "routegate.cli.serve",
    "routegate.cli.routers",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="routegate",
        description="Governed routing of requests to specialised executors. Works offline with no API key; "
        "set OPENAI_API_KEY (and OPENAI_BASE_URL / OPENAI_MODEL) to use an OpenAI-compatible model.",
    )
    parser.add_argument("--version", action="version", version=f"routegate {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
