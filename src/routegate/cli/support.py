"""``routegate chat`` / ``routegate ask`` / ``routegate route``: the support desk from the command line.

Wiring only: :class:`~routegate.settings.Settings` is built once here and handed to
:func:`~routegate.apps.support.factory.open_support_desk`: the desk of ``--desk DIR`` or, without it, the built-in
desk's configuration (embedded PostgreSQL unless ``DATABASE_URL``; the LLM when ``OPENAI_API_KEY``). ``route`` is a
dry run of the router alone (:mod:`routegate.apps.support.routing`): no database, no tool. The desk, the router and
the LLM client are imported by the command that runs them, not when the parser is built.

Every message is checked first (:mod:`routegate.cli._input`: not blank, no NUL, valid UTF-8, at most
``ROUTEGATE_MAX_MESSAGE_CHARS``); ``ask`` and ``route`` refuse a bad one with ``error: ...`` and exit 2, ``chat``
says so and waits for the next line. Without ``--session``, ``ask`` and ``chat`` start a new session.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError

from routegate.apps.support.contracts import LLM_UNAVAILABLE, AnswerToken, RouteChosen, ToolUsed, TurnError, TurnResult
from routegate.cli._command import add_command
from routegate.cli._input import checked
from routegate.cli.desk import DESK_HELP, with_desk
from routegate.core.events import FinalEvent
from routegate.settings import Settings, default_data_dir

if TYPE_CHECKING:
    from routegate.apps.support.desk import SupportAgent

_SESSION_HELP = "conversation id to continue (default: a new session, printed on stderr)"


def _data_dir_note() -> str:
    try:
        where = Settings().data_dir
    except ValidationError:  # --help must work with bad settings; the command itself reports them
        where = default_data_dir()
    return (
        f"Conversations and the embedded PostgreSQL live in the data dir, {where} "
        "(ROUTEGATE_DATA_DIR to change it; DATABASE_URL to use another PostgreSQL)."
    )


@asynccontextmanager
async def open_support_desk(settings: Settings) -> AsyncIterator[SupportAgent]:
    """The desk of ``settings`` (``--desk`` / ``ROUTEGATE_DESK``, else the built-in desk's configuration) from
    :func:`routegate.apps.support.factory.open_support_desk`, imported when a command needs the desk (the
    parser of every command imports this module, and the desk's modules are most of ``ask``'s import time).

    Offline, the database starts on a background thread first, so that its start overlaps those imports. With an
    LLM configured the factory checks the LLM settings before any database starts, as it always does.
    """
    if settings.desk is not None:  # your own desk: its configuration is checked before anything starts
        from routegate.apps.configured.config import load_config

        load_config(settings.desk)
    database = None
    if not settings.llm_enabled:
        from routegate.apps.support.embedded import DatabaseStart

        database = DatabaseStart(settings)
    try:
        from routegate.apps.support.factory import open_support_desk as open_desk

        async with open_desk(settings, database=database) as desk:
            yield desk
    finally:
        if database is not None:  # stopped already unless the import failed or was interrupted
            await asyncio.to_thread(database.stop)


def new_session_id() -> str:
    """A fresh conversation id: without ``--session`` no run sees another run's messages."""
    return f"cli-{uuid.uuid4().hex[:12]}"


def register(subparsers: Any) -> None:
    ask = add_command(subparsers, "ask", run_ask, note=_data_dir_note())
    ask.add_argument("message", help="the question")
    ask.add_argument("--session", default=None, help=_SESSION_HELP)
    ask.add_argument("--json", action="store_true", help="print the turn result as JSON")
    ask.add_argument("--desk", type=Path, default=None, help=DESK_HELP)

    chat = add_command(subparsers, "chat", run_chat, note=_data_dir_note())
    chat.add_argument("--session", default=None, help=_SESSION_HELP)
    chat.add_argument("--trace", action="store_true", help="print the route, the tool call and the fallback")
    chat.add_argument("--desk", type=Path, default=None, help=DESK_HELP)

    route = add_command(subparsers, "route", run_route)
    route.add_argument("message", nargs="?", help="the message to route")
    route.add_argument("--file", type=Path, help='JSONL file, one {"text": ...} per line; - reads standard input')
    route.add_argument("--json", action="store_true", help="print JSON lines (default for --file)")
    from routegate.cli.routers import add_ray_options

    add_ray_options(route)
    route.add_argument("--desk", type=Path, default=None, help=DESK_HELP)


# -- ask / chat ---------------------------------------------------------------------------------------------
def _session(given: str | None) -> str:
    """``--session`` checked before anything starts (bad input: exit 2), or a new session id."""
    if given is None:
        return new_session_id()
    from routegate.apps.support.inputs import check_session_id
    from routegate.errors import ConfigurationError

    try:
        return check_session_id(given)
    except ValueError:
        raise ConfigurationError(
            f"--session {given[:60]!r} is not a session id: use 1-160 letters, digits and ._:@-, "
            "or leave --session out to start a new session"
        ) from None


def run_ask(args: argparse.Namespace) -> int:
    """ask the support desk one question and print the answer

    Route one question (Postgres / Vector / External / LLM), run the tool, print the answer. Uses the embedded
    PostgreSQL unless DATABASE_URL is set, and an LLM only when OPENAI_API_KEY is set.
    """
    settings = with_desk(Settings(), args.desk)
    message = checked(args.message, settings)  # before the database or a model starts
    session = _session(args.session)
    return asyncio.run(_ask(settings, message, session, as_json=args.json, announce=args.session is None))


async def _ask(settings: Settings, message: str, session: str, *, as_json: bool, announce: bool) -> int:
    async with open_support_desk(settings) as desk:
        final = await _turn(desk, message, session, out=sys.stdout, stream=not as_json, trace=False)
    if final is None:
        return 1
    if final.fallback == LLM_UNAVAILABLE:  # the answer above is the offline one: say why
        failed = next((t.get("llm_failed") for t in final.notes if t.get("node") == "desk"), None)
        print(f"(answered offline: the language model did not answer ({failed}))", file=sys.stderr)
    if announce:  # a new session: say how to continue it
        print(f"(session {session}: continue it with --session {session})", file=sys.stderr)
    if as_json:
        print(json.dumps(final.to_dict(), ensure_ascii=False))
    return 0 if final.stop_reason == "success" else 1


async def _turn(
    desk: SupportAgent, message: str, session: str, *, out: TextIO, stream: bool, trace: bool
) -> TurnResult | None:
    final: TurnResult | None = None
    async for event in desk.iter(message, session_id=session):
        if isinstance(event, RouteChosen) and trace:
            print(f"[route {event.route} by {event.layer}: {event.why}]", file=out)
        elif isinstance(event, ToolUsed) and trace:
            print(f"[tool {event.tool}: {event.summary}]", file=out)
        elif isinstance(event, AnswerToken) and stream:
            out.write(event.text)
            out.flush()
        elif isinstance(event, FinalEvent):
            final = event.result
            if stream:
                out.write("\n")
            if trace and final.fallback:
                print(f"[fallback: {final.fallback}]", file=out)
        elif isinstance(event, TurnError):
            print(f"error ({event.code}): {event.message}", file=sys.stderr)
    return final


def run_chat(args: argparse.Namespace) -> int:
    """talk to the support desk interactively

    An interactive support-desk conversation (the last 10 messages are remembered per session). Commands:
    /history, /reset, /quit, /help; Ctrl-D or Ctrl-C ends it. Each run starts a new session unless --session
    names one.
    """
    settings = with_desk(Settings(), args.desk)
    return asyncio.run(_chat(settings, _session(args.session), trace=args.trace))


_COMMANDS = "/history /reset /quit (or /exit) /help"
_COMMAND = re.compile(r"/[A-Za-z][\w-]*")
"""A line that is one word like this is a chat command, never a message (``/etc/passwd is down`` is a message)."""


def _lines() -> Iterator[str]:
    """The lines typed at the ``you>`` prompt, until end of input (Ctrl-D). Ctrl-C at the prompt raises
    :class:`KeyboardInterrupt` at once: while the prompt waits, SIGINT gets Python's own handler back (asyncio's,
    installed by ``asyncio.run``, would only cancel the conversation once a line was entered)."""
    if isinstance(sys.stdin, io.TextIOWrapper):
        # bytes that are not UTF-8 become lone surrogates, refused with their position by the message check,
        # instead of a UnicodeDecodeError that would end the conversation
        sys.stdin.reconfigure(errors="surrogateescape")
    while True:
        try:
            with _interruptible():
                line = input("you> ")
        except EOFError:
            print()  # Ctrl-D: end the prompt's line, so the shell's prompt starts on a new one
            return
        except KeyboardInterrupt:
            print()
            raise
        yield line


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _chat(settings: Settings, session: str, *, trace: bool) -> int:
    from routegate.core.messages import InvalidMessageError

    async with open_support_desk(settings) as desk:
        print(
            f"routegate support desk — session {session!r} (continue it later with --session {session}). "
            f"Commands: {_COMMANDS}.",
            file=sys.stderr,
        )
        for line in _lines():
            text = line.strip()
            if not text:
                continue
            try:
                text = checked(text, settings)
            except InvalidMessageError as exc:
                print(f"error: {exc}", file=sys.stderr)
                continue
            if _COMMAND.fullmatch(text):
                if text in ("/quit", "/exit"):
                    break
                await _command(desk, session, text)
                continue
            sys.stdout.write("desk> ")
            await _turn(desk, text, session, out=sys.stdout, stream=True, trace=trace)
    return 0


async def _command(desk: SupportAgent, session: str, command: str) -> None:
    """A chat command other than /quit; an unknown one is said, and nothing is sent to the desk."""
    if command == "/reset":
        await desk.reset(session)
        print("(conversation cleared)")
    elif command == "/history":
        messages = await desk.history(session)
        for m in messages:
            print(f"{m.role}: {m.content}")
        if not messages:
            print("(no messages in this session yet)")
    elif command == "/help":
        print(f"commands: {_COMMANDS}; anything else is sent to the desk")
    else:
        print(f"unknown command {command}; commands: {_COMMANDS} (nothing was sent)", file=sys.stderr)


# -- route (dry run) -----------------------------------------------------------------------------------------
def run_route(args: argparse.Namespace) -> int:
    """dry-run the support router: which route would handle a message (no tool runs)

    Print the route the support router chooses, with the layer that decided and its scores. Give one message, or
    --file with one JSON object per line ({"text": ...}); one JSON line per input.
    """
    from routegate.core.messages import InvalidMessageError

    if (args.message is None) == (args.file is None):
        print("error: give either a message or --file queries.jsonl", file=sys.stderr)
        return 2
    settings = with_desk(Settings(), args.desk)
    inputs: list[dict[str, Any]] = []
    if args.file is not None:
        from routegate.routers.data import json_problem

        source = "standard input" if str(args.file) == "-" else str(args.file)
        try:
            lines = _read_queries(args.file)
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: cannot read {source}: {exc}; give a readable UTF-8 JSONL file", file=sys.stderr)
            return 2
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                print(f"error: {source}, line {number}, {json_problem(exc)}", file=sys.stderr)
                return 2
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                print(f'error: line {number} of {source} needs a "text" string', file=sys.stderr)
                return 2
            try:
                checked(item["text"], settings, from_bytes=False)
            except InvalidMessageError as exc:
                print(f"error: line {number} of {source}: {exc}", file=sys.stderr)
                return 2
            inputs.append(item)
    else:
        inputs.append({"text": checked(args.message, settings)})
    if getattr(args, "ray", False):
        if settings.desk is not None:
            print("error: route --ray runs the built-in desk's router; leave out --ray with --desk", file=sys.stderr)
            return 2
        from routegate.cli._ray_route import route_on_ray

        return route_on_ray(settings, inputs, as_json=args.json or args.file is not None, actors=args.ray_actors)
    return asyncio.run(_route(settings, inputs, as_json=args.json or args.file is not None))


def _read_queries(path: Path) -> list[str]:
    """The lines of ``path``, or of standard input for ``-`` (``... | routegate route --file -``)."""
    if str(path) == "-":
        return sys.stdin.buffer.read().decode("utf-8").splitlines()
    return path.read_text(encoding="utf-8").splitlines()


async def _route(settings: Settings, inputs: list[dict[str, Any]], *, as_json: bool) -> int:
    from routegate.apps.support.routing import route_line, support_router

    router, chat_model = support_router(settings)  # your own desk's (--desk) routes with its offline stages
    try:
        for item in inputs:
            print(await route_line(router, item, as_json=as_json))
    finally:
        if chat_model is not None:
            await chat_model.aclose()
    return 0
