"""One command of the ``routegate`` command line: a parser that runs a handler, with the handler's docstring as
its help, so that what a command does is written once, where it is done.

The docstring's first paragraph is the command's line in ``routegate --help`` (lower case, no full stop, as
argparse's own help reads); the paragraphs after it are the description ``routegate COMMAND --help`` prints.
argparse folds the docstring's line breaks when it wraps the text to the terminal.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], int]


def add_command(subparsers: Any, name: str, handler: Handler, *, note: str = "") -> argparse.ArgumentParser:
    """Add ``name`` to ``subparsers`` (what ``add_subparsers`` returned), running ``handler``; ``note`` is added
    after the description (text known only when the parser is built, such as where the data dir is).

    Under ``python -OO`` docstrings are stripped: the command then runs as usual, with no help text but ``note``.
    """
    summary, _, details = (inspect.getdoc(handler) or "").partition("\n\n")
    description = " ".join(part for part in (details, note) if part)
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=summary or None, description=description or None)
    parser.set_defaults(handler=handler)
    return parser
