"""``routegate plans list|show|history|resume``: the durable plan runs in a checkpoint store, for operators.

``--db`` is what ``Store(db=...)`` takes: a SQLite file path or a ``postgresql://`` URL. ``list`` shows every run
with its status (running / ended / interrupted); ``show KEY`` one run's path, next step, stop reason and the
question of an interrupted run; ``resume KEY --plan module:attribute`` resumes it with that plan (a
:class:`~routegate.plan.Plan`, or a function of no arguments that returns one), ``--answer`` answering an interrupt.
``history KEY`` lists every checkpoint the run wrote (:mod:`routegate.cli._plans_history`); ``show --at N`` shows
one, ``show --diagram`` draws the plan with the run's path, and ``resume --at N`` / ``--from STEP`` re-runs from a
checkpoint as a new run (:mod:`routegate.plan.history`).

What the store holds is untrusted: every string from it is printed with control characters and terminal escape
sequences escaped (``\x1b``), every value summarised (:func:`_summarised`: long texts, long lists and deep nesting
cut with a marker saying how much there was, numbers that are not finite or too long as text), and a row that
cannot be read is skipped and named instead of failing the listing.
With ``ROUTEGATE_CHECKPOINT_SIGNING_KEY`` set, ``resume`` signs and checks checkpoints with it (without it, with
the signing key of the plan's own store, if any) and ``show`` says whether a run's signature holds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sqlite3
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from routegate.cli._command import add_command
from routegate.cli._plans_history import history_rows, history_table, read_payload
from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.settings import Settings


def register(subparsers: Any) -> None:
    plans: argparse.ArgumentParser = subparsers.add_parser(
        "plans",
        help="list, inspect, rewind and resume durable plan runs (checkpoints in SQLite or PostgreSQL)",
        description="Durable plan runs: a Plan with checkpoint_key= checkpoints after every step into "
        "Store(db=...). List them, show one, or resume one (after a crash, an error, or with the answer to an "
        "interrupt).",
    )
    commands = plans.add_subparsers(title="plans commands", metavar="ACTION", required=True)
    db_help = "the checkpoint store: a SQLite file path or a postgresql:// URL (what Store(db=...) was given)"

    listing = add_command(commands, "list", run_list)
    listing.add_argument("--db", required=True, help=db_help)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")

    show = add_command(commands, "show", run_show)
    show.add_argument("key", help="the run's checkpoint_key")
    show.add_argument("--db", required=True, help=db_help)
    show.add_argument("--at", type=int, metavar="N", help="show checkpoint N of the run's history (plans history)")
    show.add_argument(
        "--diagram",
        nargs="?",
        const="mermaid",
        choices=("mermaid", "dot"),
        help="print the run's plan with the run's path drawn on it, as Mermaid (default) or Graphviz DOT text; "
        "needs --plan",
    )
    show.add_argument(
        "--plan",
        help="module:attribute of the Plan that ran it (for --diagram, and to check a signature with its store's key)",
    )

    history = add_command(commands, "history", run_history)
    history.add_argument("key", help="the run's checkpoint_key")
    history.add_argument("--db", required=True, help=db_help)
    history.add_argument("--json", action="store_true", help="one JSON object per checkpoint")

    resume = add_command(commands, "resume", run_resume)
    resume.add_argument("key", help="the run's checkpoint_key")
    resume.add_argument("--db", required=True, help=db_help)
    resume.add_argument(
        "--plan", required=True, help="module:attribute of the Plan (or of a function returning it) that ran it"
    )
    resume.add_argument("--answer", help="the answer to the run's interrupt (a string)")
    resume.add_argument("--answer-json", help="the answer to the run's interrupt, as JSON")
    earlier = resume.add_mutually_exclusive_group()
    earlier.add_argument(
        "--at", type=int, metavar="N", help="re-run from checkpoint N of its history as a new run (plans history)"
    )
    earlier.add_argument(
        "--from",
        dest="from_step",
        metavar="STEP",
        help="re-run as a new run from the latest checkpoint about to run STEP",
    )
    resume.add_argument(
        "--payload",
        metavar="FILE",
        help="with --at/--from: a JSON file (- for stdin) whose value replaces what the step receives from the "
        "step before it (checked against both steps' types)",
    )
    resume.add_argument("--key", dest="new_key", metavar="KEY", help="with --at/--from: the new run's key")


def run_history(args: argparse.Namespace) -> int:
    """every checkpoint of one run: step, time, route or stop, payload size and preview, hashes

    One line per checkpoint the store keeps of the run, oldest first: its number (what `plans show KEY --at N` and
    `plans resume KEY --at N` take), the step about to run, when it was written, how the run got there (the routing
    decision after the step before, or the stop of an ended or paused run), the size and the start of the payload
    handed to that step, and hashes of that payload (IN) and of what the run handed on after the step ran (OUT).
    """
    from routegate.plan.history import read_history

    store = _open(args.db)
    try:
        _load(store, args.key, args.db)
        history = read_history(store.checkpoints, args.key)
    finally:
        store.close()
    if args.json:
        for row in history_rows(history):
            print(_dumps(row))
    else:
        print("\n".join(history_table(args.key, history, _cell)))
    return 0


def _open(db: str, fallback_key: bytes | None = None) -> Any:
    """The store behind ``--db``, opened now, signing with ``ROUTEGATE_CHECKPOINT_SIGNING_KEY`` (else
    ``fallback_key``: the key of the resumed plan's own store, so a resume from the command line never drops the
    plan's signing). A path that is no plan store or a server that cannot be reached is said here, in the words of
    ``--db`` (not of ``DATABASE_URL``, which ``plans`` does not read)."""
    from routegate.plan import Store

    postgres = db.startswith(("postgresql://", "postgres://"))
    if not postgres and not os.path.exists(db):
        raise ConfigurationError(
            f"--db {_escaped(db)}: no such file; give the path Store(db=...) used, or a postgresql:// URL"
        )
    secret = Settings().checkpoint_signing_key
    key = secret.get_secret_value() if secret is not None else ""
    store = Store(db=db, signing_key=key or fallback_key)
    try:
        store.checkpoints  # noqa: B018  # opens the backend
    except sqlite3.OperationalError as exc:
        problem: Exception = ConfigurationError(
            f"cannot open the plan store {_escaped(db)}: {exc}; check the path and its permissions"
        )
    except sqlite3.DatabaseError as exc:
        problem = ConfigurationError(
            f"{_escaped(db)} is not a routegate plan store: {exc} (SQLite cannot read it); give the file "
            "Store(db=...) was given"
        )
    except Exception as exc:
        if not postgres or not type(exc).__module__.startswith("psycopg"):
            raise
        problem = RuntimeFaultError(
            f"cannot connect to the PostgreSQL server of --db ({_server_of(db)}): {exc}; check that the server is "
            "running and that --db is its URL"
        )
    else:
        return store
    # raised outside the handler, without the driver's error as its context: the CLI would otherwise add its
    # advice about DATABASE_URL, which plans do not read
    raise problem


def _escaped(text: str) -> str:
    """``text`` with every character that is not printable (control characters, the ESC of terminal escape
    sequences, C1 controls, bidirectional overrides) and the backslash written as Python escapes."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c != "\\" else repr(c)[1:-1] for c in text)


_SHOWN_CHARS = 2_000
_SHOWN_ITEMS = 100
_SHOWN_DEPTH = 32
_CELL_CHARS = 64


def _summarised(value: object, depth: int = 0) -> Any:
    """``value`` fit to print: a text over :data:`_SHOWN_CHARS` characters, a list or object over
    :data:`_SHOWN_ITEMS` entries and nesting deeper than :data:`_SHOWN_DEPTH` are cut with a marker saying how much
    there was; a number that is not finite becomes its name (JSON has none)."""
    if isinstance(value, str):
        return value if len(value) <= _SHOWN_CHARS else f"{value[:_SHOWN_CHARS]}… ({len(value)} characters)"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if not isinstance(value, dict | list):
        return value
    if depth >= _SHOWN_DEPTH:
        return f"<nested deeper than {_SHOWN_DEPTH} levels>"
    if isinstance(value, list):
        shown = [_summarised(item, depth + 1) for item in value[:_SHOWN_ITEMS]]
        return shown if len(value) <= _SHOWN_ITEMS else [*shown, f"… ({len(value)} items)"]
    out = {str(k): _summarised(v, depth + 1) for k, v in list(value.items())[:_SHOWN_ITEMS]}
    if len(value) > _SHOWN_ITEMS:
        out["…"] = f"({len(value)} keys)"
    return out


def _cell(value: object, limit: int = _CELL_CHARS) -> str:
    """A table cell: escaped, cut at ``limit`` characters (a key at :data:`_SHOWN_CHARS`: ``show`` needs it whole)."""
    if value is None or value == "":
        return "-"
    text = _escaped(value if isinstance(value, str) else _dumps(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dumps(value: object, **options: Any) -> str:
    """JSON whose strings hold no raw control or escape character (JSON leaves C1 controls and bidirectional
    overrides as they are; here they become ``\\uXXXX``)."""
    text = json.dumps(_summarised(value), ensure_ascii=False, default=str, **options)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text)


def _field(mapping: object, name: str) -> Any:
    return mapping.get(name) if isinstance(mapping, dict) else None


def _server_of(url: str) -> str:
    """``host:port`` of a PostgreSQL URL: enough to tell which server, without the user, password or database
    (a URL is never printed whole)."""
    parts = urlsplit(url)
    try:
        port = parts.port or 5432
    except ValueError:
        port = 5432
    return f"{parts.hostname or 'localhost'}:{port}"


def _summary(record: Any) -> dict[str, Any]:
    """One run for ``list`` and ``show``; a document of the wrong shape raises (the row is then skipped)."""
    state = record.state
    result = _field(state, "result")
    error = _field(result, "error")
    out: dict[str, Any] = {
        "key": record.key,
        "status": record.status,
        "stop_reason": record.stop_reason or None,
        "next": _field(state, "next") if record.status != "ended" or record.stop_reason != "success" else None,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.updated)),
    }
    if record.status == "interrupted":
        out["question"] = _field(error, "question")
    elif error:
        out["message"] = _field(error, "message")
    return out


def _readable(record: Any) -> dict[str, Any] | None:
    """The summary of a row, or ``None`` after naming on stderr why the row is skipped."""
    problem = record.problem
    if problem is None:
        try:
            return _summary(record)
        except (TypeError, ValueError, OverflowError, OSError) as exc:
            problem = f"{type(exc).__name__}: {exc}"
    print(f"skipped run {record.key!r}: {_escaped(problem)}", file=sys.stderr)
    return None


def run_list(args: argparse.Namespace) -> int:
    """every run: key, status, stop reason, next step, last write"""
    store = _open(args.db)
    try:
        records = store.checkpoints.runs(whole=False)  # a listing reads the heads, not every run's history
    finally:
        store.close()
    rows = [row for row in map(_readable, records) if row is not None]
    if args.json:
        for row in rows:
            print(_dumps(row))
        return 0
    if not records:
        print("no runs")
        return 0
    print(f"{'KEY':<32} {'STATUS':<12} {'STOP REASON':<28} {'NEXT':<16} UPDATED")
    for s in rows:
        print(
            f"{_cell(s['key'], _SHOWN_CHARS):<32} {_cell(s['status']):<12} {_cell(s['stop_reason']):<28} {_cell(s['next']):<16} "
            f"{s['updated']}"
        )
    return 0


def _load(store: Any, key: str, db: str) -> Any:
    record = store.checkpoints.load(key)
    if record is None:
        shown = db.split("://", 1)[0] + "://…" if "://" in db else db  # a URL may carry a password
        raise ConfigurationError(f"no run under key {key!r} in {_escaped(shown)}; see `routegate plans list --db ...`")
    return record


def run_show(args: argparse.Namespace) -> int:
    """one run: status, path, next step, the question of an interrupt"""
    if args.diagram is not None:
        return _show_diagram(args)
    store, record = _shown(args)
    out = _readable(record)
    if out is None:
        return 1
    result = _field(record.state, "result")
    out["path"] = _path_of(record)
    if args.at is not None:
        out["at"] = args.at
    if _field(record.state, "parent") is not None:
        out["parent"] = _field(record.state, "parent")
    if record.status == "ended" and record.stop_reason == "success":
        out["payload"] = _field(result, "payload")
    if store.signing_key is not None:
        out["signature"] = _signature(store.signing_key, record)
    print(_dumps(out, indent=2))
    return 0


def _path_of(record: Any) -> list[Any]:
    """The steps a stored run executed (its result's, once it ended)."""
    result = _field(record.state, "result")
    envelopes = _field(result, "envelopes") or _field(record.state, "envelopes")
    return [_field(env, "s") for env in envelopes] if isinstance(envelopes, list) else []


def _shown(args: argparse.Namespace) -> tuple[Any, Any]:
    """The store of ``show`` (closed again) and the record it shows: the run's latest checkpoint, or ``--at N``."""
    store = _open(args.db)
    try:
        record = _load(store, args.key, args.db)
        if args.at is not None:
            from routegate.plan.history import checkpoint_record

            record = checkpoint_record(store.checkpoints, args.key, args.at)
    finally:
        store.close()
    return store, record


def _show_diagram(args: argparse.Namespace) -> int:
    """``show --diagram``: the run's plan, with the run's path drawn on it (a run that has not ended successfully
    is drawn stopped at its last step)."""
    if args.plan is None:
        raise ConfigurationError(
            "--diagram draws the run's plan: give it with --plan module:attribute (the plan that ran it)"
        )
    plan = _plan(args.plan)
    _, record = _shown(args)
    try:
        drawn = plan.diagram([str(step) for step in _path_of(record)], record.stop_reason or record.status)
    except ValueError as exc:
        raise ConfigurationError(f"the run {args.key!r} was not run by --plan {args.plan}: {exc}") from None
    print(drawn.mermaid() if args.diagram == "mermaid" else drawn.dot(), end="")
    return 0


def _signature(secret: bytes, record: Any) -> str:
    from routegate.plan.durable import signature_state

    return signature_state(secret, record)


def _plan(spec: str) -> Any:
    from routegate.plan import Plan

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"--plan {spec!r}: give module:attribute, e.g. myjobs.refunds:plan")
    sys.path.insert(0, os.getcwd())
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"--plan {spec!r}: {exc}; check the module is importable from here") from exc
    finally:
        sys.path.remove(os.getcwd())
    if not isinstance(target, Plan) and callable(target):
        target = target()
    if not isinstance(target, Plan):
        raise ConfigurationError(f"--plan {spec!r} is {type(target).__name__}, not a routegate.plan.Plan")
    return target


def run_resume(args: argparse.Namespace) -> int:
    """resume one run with its plan"""
    from routegate.plan.durable import NO_ANSWER

    if args.answer is not None and args.answer_json is not None:
        raise ConfigurationError("give --answer or --answer-json, not both")
    answer: Any = NO_ANSWER
    if args.answer is not None:
        answer = args.answer
    elif args.answer_json is not None:
        try:
            answer = json.loads(args.answer_json)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"--answer-json is not JSON ({exc}); quote it, e.g. '{{\"ok\": true}}'") from exc
    forking = args.at is not None or args.from_step is not None
    if not forking and (args.payload is not None or args.new_key is not None):
        raise ConfigurationError("--payload and --key start a new run from a checkpoint: give --at N or --from STEP")
    plan = _plan(args.plan)
    store = _open(args.db, getattr(plan.store, "signing_key", None))
    parent: dict[str, Any] | None = None
    try:
        _load(store, args.key, args.db)
        if forking:
            result = _fork(plan, store, args, answer)
            parent = _field(_load(store, result.checkpoint_key, args.db).state, "parent")
        else:
            result = plan.run(store=store, checkpoint_key=args.key, answer=answer)
    finally:
        store.close()
    out = {"key": result.checkpoint_key if forking else args.key, **({"parent": parent} if parent else {})}
    out.update(result.to_dict())
    out.pop("trace", None)
    if result.question is not None:
        out["question"] = result.question
    print(_dumps(out, indent=2))
    return 0 if result.ok or result.stop_reason == "interrupted" else 1


def _fork(plan: Any, store: Any, args: argparse.Namespace, answer: Any) -> Any:
    """``resume --at N / --from STEP [--payload FILE] [--key KEY]``: a new run from one of the run's checkpoints."""
    from routegate.plan.history import NO_PAYLOAD

    payload = NO_PAYLOAD if args.payload is None else read_payload(args.payload, _escaped(args.payload))
    return plan.fork(
        args.key,
        at=args.at,
        step=args.from_step,
        payload=payload,
        answer=answer,
        store=store,
        checkpoint_key=args.new_key,
    )
