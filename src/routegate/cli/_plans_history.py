"""``routegate plans history``, ``plans show --at N / --diagram`` and ``plans resume --at N / --from STEP``: a
durable run's history, one of its checkpoints, its plan drawn with its path, and a new run forked from one of its
checkpoints (:mod:`routegate.plan.history`).

What the store holds is untrusted and printed escaped, as by the other ``plans`` commands
(:mod:`routegate.cli.plans`, whose helpers these use).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from routegate.cli import plans as base
from routegate.errors import ConfigurationError

PREVIEW_CHARS = 32


def run_history(args: argparse.Namespace) -> int:
    """``plans history KEY``: the table (or JSON lines) of the run's checkpoints."""
    from routegate.plan.history import read_history

    store = base._open(args.db)
    try:
        base._load(store, args.key, args.db)
        history = read_history(store.checkpoints, args.key)
    finally:
        store.close()
    if args.json:
        for checkpoint in history:
            row = {
                "at": checkpoint.at,
                "written": _when(checkpoint.written),
                "status": checkpoint.status,
                "stop_reason": checkpoint.stop_reason or None,
                "step": checkpoint.step,
                "iterations": checkpoint.iterations,
                "route": checkpoint.route,
                "size": checkpoint.size,
                "payload": checkpoint.payload,
                "input_hash": checkpoint.input_hash,
                "output_hash": checkpoint.output_hash,
            }
            if checkpoint.problem is not None:
                row = {"at": checkpoint.at, "problem": checkpoint.problem}
            print(base._dumps(row))
        return 0
    parent = history.parent
    origin = "" if parent is None else f" (forked from {base._cell(parent.key)} at checkpoint {parent.at})"
    print(f"run {base._cell(args.key)}{origin}: {len(history)} checkpoints")
    if not len(history):
        print("no history kept: the store keeps none (Store(history=False)), or it was written before history")
        return 0
    print(f"{'AT':>5} {'STEP':<16} {'WRITTEN':<20} {'ROUTE / STOP':<34} {'SIZE':>7} {'PAYLOAD':<34} {'IN':<12} OUT")
    for c in history:
        if c.problem is not None:
            print(f"{c.at:>5} damaged: {base._escaped(c.problem)}")
            continue
        payload = _preview(c.payload)
        print(
            f"{c.at:>5} {_fit(base._cell(c.step), 16):<16} {_when(c.written):<20} {_fit(base._cell(c.route), 34):<34} "
            f"{c.size:>7} {payload:<34} {c.input_hash or '-':<12} {c.output_hash or '-'}"
        )
    return 0


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _preview(payload: Any) -> str:
    return _fit(base._cell(json.dumps(payload, ensure_ascii=False, default=str)), PREVIEW_CHARS)


def show(args: argparse.Namespace) -> int:
    """``plans show KEY --at N`` (a checkpoint of the history) and ``--diagram`` (the plan with the run's path)."""
    from routegate.plan.history import checkpoint_record

    if args.diagram is not None and args.plan is None:
        raise ConfigurationError(
            "--diagram draws the run's plan: give it with --plan module:attribute (the plan that ran it)"
        )
    plan = base._plan(args.plan) if args.plan is not None else None
    store = base._open(args.db, getattr(getattr(plan, "store", None), "signing_key", None))
    try:
        record = base._load(store, args.key, args.db)
        if args.at is not None:
            record = checkpoint_record(store.checkpoints, args.key, args.at)
    finally:
        store.close()
    if plan is not None and args.diagram is not None:
        path, stop_reason = _path(record)
        try:
            drawn = plan.diagram(path, stop_reason)
        except ValueError as exc:
            raise ConfigurationError(f"the run {args.key!r} was not run by --plan {args.plan}: {exc}") from None
        print(drawn.mermaid() if args.diagram == "mermaid" else drawn.dot(), end="")
        return 0
    out = base._readable(record)
    if out is None:
        return 1
    out["at"] = args.at
    out["path"] = list(_path(record)[0])
    parent = base._field(record.state, "parent")
    if parent is not None:
        out["parent"] = parent
    if record.status == "ended" and record.stop_reason == "success":
        out["payload"] = base._field(base._field(record.state, "result"), "payload")
    if store.signing_key is not None:
        out["signature"] = base._signature(store.signing_key, record)
    print(base._dumps(out, indent=2))
    return 0


def _path(record: Any) -> tuple[list[str], str]:
    """The steps a checkpoint's run executed, and how it stands: its stop reason, or ``running``."""
    result = base._field(record.state, "result")
    envelopes = base._field(result, "envelopes") or base._field(record.state, "envelopes")
    path = [str(base._field(env, "s")) for env in envelopes] if isinstance(envelopes, list) else []
    return path, record.stop_reason or record.status


def resume_from(args: argparse.Namespace, answer: Any) -> int:
    """``plans resume KEY --at N / --from STEP [--payload FILE]``: a new run from one of the run's checkpoints."""
    from routegate.plan.history import NO_PAYLOAD

    payload: Any = NO_PAYLOAD
    if args.payload is not None:
        payload = _payload(args.payload)
    plan = base._plan(args.plan)
    store = base._open(args.db, getattr(plan.store, "signing_key", None))
    try:
        base._load(store, args.key, args.db)
        result = plan.fork(
            args.key,
            at=args.at,
            step=args.from_step,
            payload=payload,
            answer=answer,
            store=store,
            checkpoint_key=args.new_key,
        )
        parent = plan.history(result.checkpoint_key, store=store).parent
    finally:
        store.close()
    out: dict[str, Any] = {"key": result.checkpoint_key}
    if parent is not None:
        out["parent"] = {"key": parent.key, "at": parent.at, "edited": parent.edited}
    out.update(result.to_dict())
    out.pop("trace", None)
    if result.question is not None:
        out["question"] = result.question
    print(base._dumps(out, indent=2))
    return 0 if result.ok or result.stop_reason == "interrupted" else 1


def _payload(name: str) -> Any:
    """The JSON in file ``name`` (``-``: standard input)."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"--payload {base._escaped(name)}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f'--payload {base._escaped(name)} is not JSON ({exc}); write the payload as JSON, e.g. {{"n": 2}}'
        ) from None
