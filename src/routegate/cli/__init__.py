"""``routegate`` command line: each subcommand lives in its own module with a ``register(subparsers)``.

:func:`main` is the one top-level error handler: whatever a command raises becomes one line
``error: <what>; <what to do>`` on stderr and a non-zero exit (2: bad input or configuration, 1: a failure while
running, 130: interrupted by Ctrl-C, 143: stopped by SIGTERM), never a traceback. SIGTERM unwinds like Ctrl-C
(``finally`` blocks run), so a command stops the servers it started before it exits. ``--debug`` (before or after the command) or ``ROUTEGATE_DEBUG=1``
prints the traceback too.

Start-up is kept light: building the parser imports each command's module, and those import what their command
runs (the desk, the server, the LLM client) inside the handler, so ``routegate ask`` loads neither uvicorn nor
FastAPI nor, without ``OPENAI_API_KEY``, the ``openai`` SDK.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from routegate._suggest import did_you_mean
from routegate.cli._errors import configure_logging, debug_from_env, describe, exit_code
from routegate.cli._signals import Terminated, exit_status, terminate_like_interrupt

# Each module defines register(subparsers) and adds its commands with cli._command.add_command (docstring = help).
COMMAND_MODULES: tuple[str, ...] = (
    "routegate.cli.triage",
    "routegate.cli.support",
    "routegate.cli.serve",
    "routegate.cli.routers",
    "routegate.cli.plans",
    "routegate.cli.data",
    "routegate.cli.desk",
)


_DEBUG_HELP = "on an error, print the traceback too (also ROUTEGATE_DEBUG=1)"


class _VersionAction(argparse.Action):
    """``--version``: reads the package metadata when asked, not on every start."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *args: Any, **kw: Any) -> None:
        import routegate

        print(f"routegate {routegate.__version__}")
        parser.exit()


def _common_options() -> argparse.ArgumentParser:
    """The options every command takes after its name too (``routegate plans list --db x --debug``): the one
    parent parser of every command's parser. ``SUPPRESS`` keeps the value given before the command otherwise."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    return common


_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


class _Parser(argparse.ArgumentParser):
    """A parser that refuses what it does not know itself, with its own usage and the flag that was meant.

    argparse hands the words a command's parser does not know back up to the top-level parser, which refuses them
    with the top-level usage (``routegate ask --jsno`` would print ``usage: routegate [-h] ... COMMAND``). Here
    each parser, nested commands' included, refuses its own leftovers: its usage, the error, and for a mistyped flag
    the close one its usage offers (``--jsno (did you mean '--json'?)``). A flag hidden from the usage is never
    suggested.

    argparse's other defaults are kept on purpose: ``allow_abbrev`` (``--sess`` for ``--session``, as the commands
    always took it; an ambiguous prefix is refused by argparse with the candidates) and ``exit_on_error`` (a bad
    command line exits 2 after the usage, the status :func:`main` gives every bad input).
    """

    # typeshed overloads parse_known_args on the namespace's type; argparse itself calls it as below
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(self._meant(extra) for extra in extras)}")
        return parsed, extras

    def _meant(self, word: str) -> str:
        if not word.startswith("-"):
            return word
        return word + did_you_mean(word.partition("=")[0], _FLAG.findall(self.format_usage()))


class _CommandParser(_Parser):
    """The parser of a command, nested ones included (``plans`` builds its actions' parsers with this class too,
    as ``add_subparsers`` reuses its parser's class): each has the common options as a parent."""

    def __init__(self, *, parents: Sequence[argparse.ArgumentParser] = (), **kwargs: Any) -> None:
        super().__init__(parents=[*parents, _common_options()], **kwargs)  # add_parser passes keywords only


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="routegate",
        description="Governed routing of requests to specialised executors. Works offline with no API key; "
        "set OPENAI_API_KEY (and OPENAI_BASE_URL / OPENAI_MODEL) to use an OpenAI-compatible model.",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_CommandParser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured): nothing to flush into a pipe
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False)) or debug_from_env(os.environ)
    configure_logging(sys.stderr, debug=debug)
    try:
        with terminate_like_interrupt():  # SIGTERM unwinds like Ctrl-C: what the command started is stopped
            return int(handler(args))
    except KeyboardInterrupt as interrupt:
        print("terminated" if isinstance(interrupt, Terminated) else "interrupted", file=sys.stderr)
        return exit_status(interrupt)
    except BrokenPipeError:
        # the reader went away (``routegate route --file q.jsonl | head``): stop quietly, as Unix tools do
        _silence_stdout()
        return 141
    except Exception as exc:
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(f"error: {describe(exc)}", file=sys.stderr)
        return exit_code(exc)
