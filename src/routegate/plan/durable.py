"""Durable runs: the checkpoint a plan writes after every step, and how a run resumes from it.

A checkpoint is a JSON document: the plan's fingerprint, the run's input, the index of the step about to run, the
payload it will receive, the iteration counter, the pending rejoin of an exclusive branch, every executed
envelope and routing decision, the store's writes, the members of a parallel band that already finished, and the
answers given to interrupts. Payloads are stored as JSON and read back through the producing step's ``output=``
type (pydantic models come back as models).

The step in flight when a process dies runs again on resume (at-least-once): :func:`step_key` gives it a key
that is the same on every attempt, for idempotent side effects.

A stored checkpoint is untrusted input: before it steers a run it is checked against the plan
(:mod:`routegate.plan._validate`) and, when the store has a signing key, its signature
(:mod:`routegate.plan._signature`); the position it resumes at is the one its recorded path leads to, and the
payload the next step receives is read from that path.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable
from typing import Any, Literal

from routegate.core.contracts import jsonable
from routegate.core.stop_reasons import SUCCESS
from routegate.errors import ConfigurationError
from routegate.plan._deltas import Kept
from routegate.plan._position import Position
from routegate.plan._shape import PlanShape, StepShape
from routegate.plan._signature import PATH_FIELDS, Chain, sign, verify
from routegate.plan._validate import check_checkpoint, check_readable, damaged
from routegate.plan.checkpoint import ENDED, INTERRUPTED, RUNNING, CheckpointLog, Checkpoints, Lease, RunRecord
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import CheckpointConflictError, CheckpointMismatchError, Interrupt
from routegate.plan.result import PlanResult

FORMAT = 2  # format 1 and an optional "sig": the HMAC of a store with a signing key (routegate.plan._signature)
FORK_FORMAT = 3  # format 2 and "parent": the run and checkpoint a fork started from (routegate.plan.history)
NO_ANSWER: Any = object()


class _Scope:
    """The step running now in a durable run: its idempotency key and the answers given to its interrupts."""

    __slots__ = ("answers", "key", "used")

    def __init__(self, key: str, answers: list[Any]) -> None:
        self.key = key
        self.answers = answers
        self.used = 0


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("routegate_plan_step", default=None)


def step_key() -> str | None:
    """The idempotency key of the step running now in a durable run (``None`` outside one).

    It is ``"<checkpoint_key>/<iteration>/<step name>"``: the same when a resumed run runs the step again after
    a crash, different for each visit of a step inside a loop. Use it to make side effects idempotent (a unique
    key of the row you insert, the ``Idempotency-Key`` header of the payment you make).
    """
    scope = _SCOPE.get()
    return None if scope is None else scope.key


def interrupt(question: Any = None) -> Any:
    """Pause the run to ask a person ``question`` (LangGraph's ``interrupt()``).

    The first time, this raises :class:`~routegate.plan.Interrupt`: the run ends with stop reason
    ``"interrupted"`` and ``result.question == question``. When a durable run is resumed with
    ``plan.run(answer=...)``, the step runs again and this call returns the answer. A step may ask several
    questions in turn: the n-th call returns the n-th answer.
    """
    scope = _SCOPE.get()
    if scope is not None and scope.used < len(scope.answers):
        answer = scope.answers[scope.used]
        scope.used += 1
        return answer
    raise Interrupt(question, key=None if scope is None else scope.key)


def _error_doc(err: ErrorInfo) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": err.type, "message": err.message, "stop_reason": err.stop_reason, "phase": err.phase}
    exc = err.exception
    if isinstance(exc, Interrupt):
        doc["question"] = jsonable(exc.question)
        doc["key"] = exc.key
    return doc


def _error_of(doc: dict[str, Any]) -> ErrorInfo:
    exc: BaseException | None = None
    if doc.get("stop_reason") == INTERRUPTED and "question" in doc:
        exc = Interrupt(doc["question"], key=doc.get("key"))
    return ErrorInfo(str(doc["type"]), str(doc["message"]), str(doc["stop_reason"]), exc, doc.get("phase", "step"))


class _Codec:
    """Payloads to JSON and back, through the producing step's ``output=`` type (``steps``: the plan's)."""

    def __init__(self, steps: tuple[StepShape, ...]) -> None:
        self.steps = steps
        self.index = {c.name: c for c in steps}
        self.band_of: dict[str, StepShape] = {}
        for c in steps:
            if c.band_end:
                for m in steps[c.index : c.band_end]:
                    self.band_of[m.name] = c

    def _validator(self, name: str | None) -> Callable[[Any], Any] | None:
        c = self.index.get(name or "")
        return None if c is None else c.decode

    def encode_env(self, env: Envelope) -> dict[str, Any]:
        doc: dict[str, Any] = {"s": env.step, "p": jsonable(env.payload), "ms": round(env.elapsed_ms, 3)}
        if env.error is not None:
            doc["e"] = _error_doc(env.error)
        return doc

    def decode_env(self, doc: dict[str, Any]) -> Envelope:
        err = doc.get("e")
        if err is not None:
            return Envelope(None, _error_of(err), None, doc.get("s"), float(doc.get("ms", 0.0)))
        return Envelope(self.decode(doc.get("p"), doc.get("s")), None, None, doc.get("s"), float(doc.get("ms", 0.0)))

    def decode(self, value: Any, name: str | None) -> Any:
        validate = self._validator(name)
        if value is None or validate is None:
            return value
        return validate(value)

    def _writer(self, key: str, envelopes: list[Envelope]) -> str | None:
        for env in reversed(envelopes):
            c = self.index.get(env.step or "")
            if c is not None and c.writes == key:
                return c.name
        return None


class DurableRun(_Codec):
    """One durable run: the backend, the lease on its key, and the checkpoint being written."""

    def __init__(self, shape: PlanShape, backend: Checkpoints, key: str, lease: Lease, secret: bytes | None) -> None:
        super().__init__(shape.steps)
        self.backend = backend
        # a backend that keeps the run's history gets each checkpoint with what it shares with the one before
        self.log = backend if isinstance(backend, CheckpointLog) else None
        self.kept: Kept | None = None  # None: this attempt has not written yet (its first row is whole)
        self.parent: dict[str, Any] | None = None  # a fork's origin, carried into every checkpoint it writes
        self.key = key
        self.lease = lease
        self.fp = shape.fingerprint
        self.secret = secret
        self.state: dict[str, Any] | None = None  # the checkpoint to resume from (None: a fresh run)
        self.retry = False  # resuming a run that ended with an error or a stop
        self.input: Any = None
        self.envs: list[dict[str, Any]] = []  # encoded envelopes, appended as steps run
        self.decs: list[list[Any]] = []  # encoded decisions, appended as steps run
        # the hash chains of the path signed so far (a signing store): each checkpoint hashes only what it added
        self.chains: dict[str, Chain | None] = {name: Chain() for name in PATH_FIELDS}
        self.band: dict[str, dict[str, Any]] = {}  # encoded members of the band in flight
        self.answers: dict[str, list[Any]] = {}
        self.allowance = 0  # steps already used by earlier attempts of this key that a retry does not count
        self.token: contextvars.Token[_Scope | None] | None = None
        self.scope = _Scope("", [])
        self.at = 0
        self.iterations = 0
        self.doc: dict[str, Any] = {}

    # -- encoding --------------------------------------------------------------------------------------------
    def _encode_prev(self, prev: Any) -> dict[str, Any]:
        if isinstance(prev, ErrorInfo):
            return {"e": _error_doc(prev)}
        return {"v": jsonable(prev)}

    def _prev(self, envelopes: list[Envelope], value: Any) -> Any:
        """What the next step receives, read from the path (the checkpoint's ``"prev"`` is not trusted): the
        input, the last step's payload (its error, when a route caught it), or a band's joined payloads."""
        if not envelopes:
            return value
        last = envelopes[-1]
        if last.error is not None:
            return last.error
        first = self.band_of.get(last.step or "")
        if first is None:
            return last.payload
        size = first.band_end - first.index
        return {env.step: env.payload for env in envelopes[-size:]}

    def _put(self, status: str, stop_reason: str, doc: dict[str, Any]) -> None:
        if self.secret is not None:
            chains = self.chains
            for name, chain in chains.items():  # the path only grows within an attempt: hash what it gained
                assert chain is not None
                chain.extend(doc[name][chain.count :])
            sign(self.secret, self.key, status, stop_reason, doc, chains)
        log = self.log
        if log is None:
            self.backend.save(self.key, status, stop_reason, doc)
            return
        log.append(self.key, status, stop_reason, doc, self.kept)
        self.kept = (len(doc["envelopes"]), len(doc["decisions"]))

    # -- the interpreter's hooks -----------------------------------------------------------------------------
    def restore(self, value: Any, store: Any) -> Position:
        """Where the run starts: the first step for a fresh run, else the checkpoint's position (its path to
        append to the run's, its store writes applied to ``store``); the run's input is :attr:`input` afterwards.

        The checkpoint was checked against the plan when the run was opened; a payload that does not validate
        as its step's ``output=`` type raises :class:`CheckpointMismatchError` here."""
        self.token = _SCOPE.set(self.scope)
        state = self.state
        if state is None:
            self.input = value
            return Position(0, value, 0, -1, (), ())
        try:
            return self._restore(state, value, store)
        except CheckpointMismatchError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:  # checked at open: a net
            raise damaged(self.key, f"{type(exc).__name__}: {exc}") from exc

    def _restore(self, state: dict[str, Any], value: Any, store: Any) -> Position:
        if value is None:
            value = state.get("input")
        self.input = value
        parent = state.get("parent")
        self.parent = parent if isinstance(parent, dict) else None
        envelopes: list[Envelope] = []
        for doc in state.get("envelopes", []):
            envelopes.append(self._decoded(doc))
            self.envs.append(doc)
        decisions = [(d[0], d[1]) for d in state.get("decisions", [])]
        self.decs.extend([d[0], d[1]] for d in decisions)
        if store is not None and callable(getattr(store, "write", None)):
            for k, v in state.get("store", {}).items():
                store.write(k, self.decode(v, self._writer(k, envelopes)))
        self.band = dict(state.get("band", {}))
        for doc in self.band.values():
            self._decoded(doc)
        self.answers = {k: list(v) for k, v in state.get("answers", {}).items()}
        prev = self._prev(envelopes, value)
        iterations = int(state.get("iterations", 0))
        self.at, self.iterations = int(state.get("at", 0)), iterations
        self.allowance = int(state.get("allowance", 0))
        if self.retry:
            self.allowance = iterations
        at, rejoin, count = int(state.get("at", 0)), int(state.get("rejoin", -1)), len(self.steps)
        if not (0 <= at < count and -1 <= rejoin < count and iterations >= 0 and self.allowance >= 0):
            raise ValueError(f"position at={at}, rejoin={rejoin}, iterations={iterations} do not fit the plan")
        if any(env.step not in self.index for env in envelopes):
            raise ValueError("the path names a step this plan does not have")
        return Position(at, prev, iterations, rejoin, envelopes, decisions)

    def _decoded(self, doc: dict[str, Any]) -> Envelope:
        try:
            return self.decode_env(doc)
        except (ValueError, TypeError) as exc:  # a pydantic ValidationError is a ValueError
            what = f"the payload of step {doc.get('s')!r} does not validate as its output type"
            raise damaged(self.key, f"{what} ({type(exc).__name__}: {exc})") from exc

    def save(self, position: Position, store: Any) -> None:
        """Checkpoint the run as it stands at ``position`` (called before every step) with ``store``'s writes."""
        at, iterations = position.at, position.iterations
        if at != self.at or iterations != self.iterations:
            self.band = {}  # a new step: the band in flight (if any) is done
        envs, decs = self.envs, self.decs
        for env in position.envelopes[len(envs) :]:
            envs.append(self.encode_env(env))
        decs.extend(list(d) for d in position.decisions[len(decs) :])  # the path grows: encode what it gained
        self.at, self.iterations = at, iterations
        name = self.steps[at].name
        key = f"{self.key}/{iterations + 1}/{name}"
        prefix = f"{self.key}/{iterations + 1}/"
        live = {k: v for k, v in self.answers.items() if k.startswith(prefix)}
        self.answers = live
        scope = self.scope
        scope.key, scope.answers, scope.used = key, live.get(key, []), 0
        to_dict = getattr(store, "to_dict", None)
        self.doc = {
            "format": FORMAT if self.parent is None else FORK_FORMAT,
            "fingerprint": self.fp,
            "input": jsonable(self.input),
            "at": at,
            "next": name,
            "prev": self._encode_prev(position.prev),
            "iterations": iterations,
            "allowance": self.allowance,
            "rejoin": position.rejoin,
            "envelopes": envs,
            "decisions": decs,
            "store": jsonable(to_dict()) if callable(to_dict) else {},
            "band": self.band,
            "answers": live,
        }
        if self.parent is not None:
            self.doc["parent"] = self.parent
        self._put(RUNNING, "", self.doc)

    def member_key(self, name: str) -> str:
        return f"{self.key}/{self.iterations + 1}/{name}"

    def member_scope(self, name: str) -> _Scope:
        key = self.member_key(name)
        return _Scope(key, self.answers.get(key, []))

    def band_done(self, name: str) -> Envelope | None:
        """The envelope of a band member that finished before the crash (``None``: run it)."""
        doc = self.band.get(name)
        return None if doc is None else self.decode_env(doc)

    def member_finished(self, env: Envelope) -> None:
        """Checkpoint a band member that succeeded, so a crash of a sibling does not run it again."""
        if env.error is None and env.step is not None:
            self.band[env.step] = self.encode_env(env)
            self.doc["band"] = self.band
            self._put(RUNNING, "", self.doc)

    def finish(self, result: PlanResult) -> None:
        """Record how the run ended: ``ended`` (success, error, stop) or ``interrupted``, with the result."""
        error = result.error
        doc = self.doc
        if error is not None and isinstance(error.exception, Interrupt):
            key = error.exception.key
            if key is not None:
                doc["answers"] = {key: self.answers.get(key, [])}
                doc["asked"] = key
            status = INTERRUPTED
        else:
            status = ENDED
        doc["result"] = {
            "stop_reason": result.stop_reason,
            "payload": jsonable(result.output),
            "error": None if error is None else _error_doc(error),
            "envelopes": [self.encode_env(env) for env in result.envelopes],
            "decisions": [list(d) for d in result._decisions],
            "elapsed_ms": round(result.elapsed_ms, 3),
        }
        self._put(status, result.stop_reason, doc)
        result.checkpoint_key = self.key

    def abort(self, exc: BaseException) -> None:
        """The run raised (a plan bug, a cancellation): record it as ended so it is never left running."""
        if not self.doc:
            return
        reason = "cancelled" if not isinstance(exc, Exception) else f"plan_error:{type(exc).__name__}"
        self.doc["result"] = {
            "stop_reason": reason,
            "payload": None,
            "error": {"type": type(exc).__name__, "message": str(exc), "stop_reason": reason, "phase": "step"},
            "envelopes": self.envs,
            "decisions": self.doc.get("decisions", []),
            "elapsed_ms": 0.0,
        }
        self._put(ENDED, reason, self.doc)

    def close(self) -> None:
        if self.token is not None:
            _SCOPE.reset(self.token)
            self.token = None
        self.lease.release()


def stored_result(steps: tuple[StepShape, ...], record: RunRecord, store: Any) -> PlanResult:
    """The result of a finished run, rebuilt from its checkpoint (nothing runs); a stored payload that does not
    validate as its step's ``output=`` type raises :class:`CheckpointMismatchError`."""
    try:
        return _stored_result(steps, record, store)
    except (ValueError, TypeError) as exc:  # a pydantic ValidationError is a ValueError
        what = "its stored result does not validate as the plan's output types"
        raise damaged(record.key, f"{what} ({type(exc).__name__}: {exc})") from exc


def _stored_result(steps: tuple[StepShape, ...], record: RunRecord, store: Any) -> PlanResult:
    run = _Codec(steps)
    doc = record.state.get("result", {})
    envelopes = [run.decode_env(e) for e in doc.get("envelopes", [])]
    decisions = [(d[0], d[1]) for d in doc.get("decisions", [])]
    error = None if doc.get("error") is None else _error_of(doc["error"])
    payload = None
    if error is None:
        payload = run.decode(doc.get("payload"), envelopes[-1].step if envelopes else None)
    if store is not None and callable(getattr(store, "write", None)):
        for k, v in record.state.get("store", {}).items():
            store.write(k, run.decode(v, run._writer(k, envelopes)))
    result = PlanResult(
        record.state.get("input"), payload, error, envelopes, decisions, store, float(doc.get("elapsed_ms", 0.0))
    )
    result.checkpoint_key = record.key
    return result


def signature_state(secret: bytes, record: RunRecord) -> Literal["valid", "invalid", "missing"]:
    """Whether ``record`` (a stored checkpoint) carries a signature by ``secret``: ``"valid"``, ``"invalid"`` (a
    signature that does not match: another key, or tampered) or ``"missing"`` (none at all)."""
    try:
        verify(secret, record)
    except CheckpointMismatchError:
        return "missing" if not isinstance(record.state.get("sig"), str) else "invalid"
    return "valid"


def trust(shape: PlanShape, record: RunRecord, secret: bytes | None) -> None:
    """Refuse a stored checkpoint the plan of ``shape`` must not resume: unreadable, of an unknown format,
    unsigned or badly signed (when ``secret`` is set), written by another plan, or not consistent with this plan's
    graph."""
    fp = shape.fingerprint
    check_readable(record)
    if secret is not None:
        verify(secret, record)
    found = record.state.get("fingerprint")
    if found != fp:
        raise CheckpointMismatchError(
            f"the checkpoint of {record.key!r} was written by a different plan (its steps, targets or routes "
            f"changed: fingerprint {found!r} != {fp!r}); resume it with the plan that wrote it, or start over with "
            "resume=False or another checkpoint_key"
        )
    check_checkpoint(shape.steps, record)


def open_run(
    shape: PlanShape,
    backend: Checkpoints,
    key: str,
    resume: bool,
    on_concurrent: str,
    answer: Any,
    store: Any,
    secret: bytes | None = None,
) -> DurableRun | PlanResult:
    """Take the lease of ``key`` (or fork it) and decide where the run of the plan of ``shape`` starts: a
    :class:`DurableRun` to drive, or the stored :class:`PlanResult` of a run that already finished successfully.
    ``secret`` signs what the run writes and is required of what it resumes."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"checkpoint_key must be a non-empty string, got {key!r}")
    lease = backend.acquire(key)
    source = key
    if lease is None:
        if on_concurrent != "fork":
            raise CheckpointConflictError(
                f"checkpoint_key {key!r} is held by a live run (in this or another process); wait for it to end, "
                "use another key, or build the plan with on_concurrent='fork'"
            )
        key = f"{key}/fork-{uuid.uuid4().hex[:8]}"
        lease = backend.acquire(key)
        assert lease is not None  # a fresh random key
    try:
        record = backend.load(source) if resume else None
        if record is not None:
            trust(shape, record, secret)
        if answer is not NO_ANSWER and record is not None and record.status != INTERRUPTED:
            raise ConfigurationError(
                f"answer= was given but the run {source!r} is {record.status}, not interrupted; resume it without "
                "answer="
            )
        if record is not None and record.status == ENDED and record.stop_reason == SUCCESS and source == key:
            lease.release()
            return stored_result(shape.steps, record, store)
        run = DurableRun(shape, backend, key, lease, secret)
        if record is not None:
            state = dict(record.state)
            state.pop("result", None)
            run.state = state
            run.retry = record.status == ENDED
            if answer is not NO_ANSWER:
                asked = state.get("asked")
                if record.status != INTERRUPTED or not isinstance(asked, str):
                    raise ConfigurationError(
                        f"answer= was given but the run {source!r} is {record.status}, not interrupted; resume it "
                        "without answer="
                    )
                answers = dict(state.get("answers", {}))
                answers[asked] = [*answers.get(asked, []), answer]
                state["answers"] = answers
        elif answer is not NO_ANSWER:
            raise ConfigurationError(
                f"answer= was given but there is no interrupted run to resume under {source!r}"
                + ("" if resume else " (the plan has resume=False)")
            )
        return run
    except BaseException:
        lease.release()
        raise


__all__ = ["NO_ANSWER", "DurableRun", "interrupt", "open_run", "signature_state", "step_key"]
