"""The governed step: the one place a decision becomes an executed, checked, traced delegation.

Every runtime that lets something untrusted choose what runs goes through :class:`GovernedStep`: the routing
agent for each route attempt, the support desk for its tool call, the technique dispatcher for each part of an
output. One step is:

1. **validate** the decision against the :class:`~routegate.core.RoutePolicy` (``invalid_route:*``);
2. **delegate** the validated intent through the :class:`~routegate.core.RouteGateway`, under the run's
   :class:`~routegate.core.contracts.DelegationLedger` (``max_delegations``, ``route_denied``, ``route_missing``,
   ``loop_detected``, ``route_bad_args``, ``route_error``), handing the worker the run's
   :class:`~routegate.core.RunContext` if it asks for one;
3. **check the observation** against the step's contract (by default: a mapping whose ``status`` is one of the
   accepted statuses; ``route_bad_observation`` otherwise);
4. write **one** :class:`~routegate.core.TraceEntry`.

When a worker declares flow rules (:mod:`routegate.core.provenance`), **validate** also matches the decision's
arguments to the run's sources (``route_denied:provenance:<arg>``, phase ``delegate`` like the gateway's other
``route_denied`` refusals, before anything runs) and **delegate** records the worker's observation as a source
(``tool:<worker>#<n>``) and the arguments' origins on the trace entry. Without a rule on any worker, neither
happens.

It returns :class:`Delegated` or :class:`Stopped` and never raises for anything the decision, the arguments or the
worker hold (a worker's :class:`~routegate.errors.RunStopError` is a stop too). The run's deadline is the caller's
:class:`~routegate.core._deadline.Deadline` around the whole run, so one clock bounds every step.

What enters a run is labelled the same way by every runtime, through :meth:`GovernedStep.admit`: the user's
request as ``user``, the caller's configuration as ``config``, a conversation's earlier user messages as ``user``
and its earlier answers as ``tool:memory#<n>`` — only when a worker declares flow rules (or the caller asks).
A refusal a runtime hands back to its router instead of ending the run (``on_refusal="observe"``) is shaped by
:func:`refusal_observation` and, when the budget runs out, ends as :func:`refusals_exhausted`.

A runtime that validates and delegates at different moments (the desk validates when its router step runs and
delegates in its tool step; the dispatcher validates every part before it runs the first) calls
:meth:`GovernedStep.validate` and :meth:`GovernedStep.delegate` separately; :meth:`GovernedStep.run` is both.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from opentelemetry.trace import Span
from pydantic import BaseModel

from routegate.core import stop_reasons as sr
from routegate.core._faults import ErrorInfo
from routegate.core.context import RunContext
from routegate.core.contracts import (
    ABSENT,
    OBSERVATION_STATUSES,
    HistoryEntry,
    RouteIntent,
    RouteProposal,
    TraceEntry,
)
from routegate.core.events import DecisionEvent, DelegationEvent, ObservationEvent
from routegate.core.flow_rules import FlowRules
from routegate.core.gateway import DelegationStop, RouteGateway, WorkerCalled
from routegate.core.hashing import args_hash
from routegate.core.outcome import Outcome
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.protocols import RouteDecision
from routegate.core.provenance import OutputCheck, ProvenanceLedger
from routegate.core.telemetry import Attr, record_stop
from routegate.errors import RunStopError

OnRefusal = Literal["end", "observe"]
"""What a policy refusal does to a run: end it, or be handed back to the router as an observation."""

ObservationCheck = Callable[[object], "tuple[str, str] | None"]
"""Checks what a worker returned: ``None`` to accept it, ``(stop_reason, message)`` to stop the run."""


@dataclass(slots=True)
class Delegated:
    """The worker ran and its observation passed the check.

    ``observation`` is the value as a mapping (a dict, a pydantic model or a dataclass), ``None`` when it is none
    of those; ``status`` is its ``status`` field when that is a string.
    """

    intent: RouteIntent
    value: object
    observation: Mapping[str, Any] | None
    status: str | None
    trace: TraceEntry

    @property
    def history(self) -> HistoryEntry | None:
        """The run-history entry of this delegation (``None`` when the observation is not a mapping)."""
        if self.observation is None:
            return None
        return HistoryEntry(self.trace.attempt, self.intent, self.observation)


@dataclass(slots=True)
class Stopped:
    """The step ended the run: why (``outcome``), its trace entry, and what the result should show.

    ``intent`` is the validated route when the policy accepted it; ``raw`` the refused decision when it did not;
    ``value`` and ``status`` what the worker returned when its observation failed the check.
    """

    outcome: Outcome
    trace: TraceEntry
    intent: RouteIntent | None = None
    raw: object = ABSENT
    value: object = ABSENT
    status: object = ABSENT

    @property
    def stop_reason(self) -> str:
        return self.outcome.stop_reason


def as_mapping(value: object) -> dict[str, Any] | None:
    """``value`` as a plain dict when it is a mapping, a pydantic model or a dataclass instance; else ``None``."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return None


def status_check(statuses: tuple[str, ...] = OBSERVATION_STATUSES) -> ObservationCheck:
    """The observation contract: a mapping whose ``status`` is one of ``statuses``."""
    accepted = frozenset(statuses)
    expected = list(statuses)

    def check(value: object) -> tuple[str, str] | None:
        status = value.get("status") if isinstance(value, Mapping) else None
        if status in accepted:
            return None
        return sr.ROUTE_BAD_OBSERVATION, f"returned status {status!r}; expected one of {expected}"

    return check


class GovernedStep:
    """Validate → delegate → check → trace, for one policy and one gateway (shareable across runs)."""

    __slots__ = ("_rules", "check", "gateway", "observed", "policy", "statuses")

    def __init__(
        self,
        policy: RoutePolicy,
        gateway: RouteGateway,
        *,
        statuses: tuple[str, ...] = OBSERVATION_STATUSES,
        check: ObservationCheck | None = None,
        observed: Callable[[object], object] | None = None,
    ) -> None:
        """``observed`` picks what of a worker's return value is recorded as its output in the run's sources
        (default: the observation as a mapping, or the value itself)."""
        self.policy = policy
        self.gateway = gateway
        self.statuses = statuses
        self.check = check or status_check(statuses)
        self.observed = observed
        rules = {name: w.flow_rules for name, w in gateway.workers.items() if w.flow_rules is not None}
        self._rules: dict[str, FlowRules] | None = rules or None

    @property
    def tracks_provenance(self) -> bool:
        """Does a worker of this step declare flow rules (so a run should keep a provenance ledger)?"""
        return self._rules is not None

    def admit(
        self,
        ctx: RunContext[Any],
        request: str | None,
        config: Mapping[str, Any] | None = None,
        *,
        conversation: Iterable[tuple[str, str]] = (),
        always: bool = False,
    ) -> ProvenanceLedger | None:
        """Label what enters the run ``ctx`` starts: the user's ``request`` (``user``), the caller's ``config``
        (``config``) and the ``conversation`` before it (:meth:`ProvenanceLedger.of_request`). Every runtime
        calls this once per run, before its first decision; the workers' outputs are recorded by
        :meth:`delegate`. Nothing is kept unless a worker declares flow rules or ``always`` (an output check, a
        dispatcher further down that does). A context that already has a ledger — the run of an outer runtime
        this one is part of — keeps it: the sources are the run's, not this runtime's."""
        if ctx.provenance is not None:
            return ctx.provenance
        if self._rules is None and not always:
            return None
        ctx.provenance = ProvenanceLedger.of_request(request, config, conversation=conversation)
        return ctx.provenance

    def validate(
        self,
        decision: RouteDecision,
        ctx: RunContext[Any],
        attempt: int = 1,
        previous: HistoryEntry | None = None,
        started: float | None = None,
    ) -> RouteIntent | Stopped:
        """The policy's verdict on ``decision``; a refusal is a :class:`Stopped` in phase ``route`` (``delegate``
        for a flow rule's ``route_denied:provenance:<arg>``)."""
        t0 = time.perf_counter() if started is None else started
        if previous is None:
            previous_target = previous_status = None
        else:
            previous_target, previous_status = previous.route.target, previous.status
        with ctx.spans.policy(attempt) as checked:
            verdict = self.policy.validate(
                decision.raw, previous_target=previous_target, previous_status=previous_status
            )
            refused = None
            if self._rules is not None and isinstance(verdict, RouteIntent):
                refused = self._flows(verdict, decision, ctx, attempt, t0)
            _record_verdict(checked, verdict, refused)
            if refused is not None:
                return refused
        emit = ctx.emit
        if isinstance(verdict, RouteRejection):
            if emit is not None:
                emit(DecisionEvent(attempt, decision, None, verdict.stop_reason))
            entry = _entry(attempt, None, t0, decision, "route", None, verdict.stop_reason)
            return Stopped(Outcome(False, verdict.stop_reason, "route", verdict.message), entry, raw=decision.raw)
        if emit is not None:
            emit(DecisionEvent(attempt, decision, verdict))
        return verdict

    def discard(self, intents: Iterable[RouteIntent], ctx: RunContext[Any]) -> None:
        """Validated decisions that will not be delegated (a runtime that checks a batch refused a later one):
        the evidence :meth:`validate` kept for their trace entries is dropped."""
        ledger = ctx.provenance
        if ledger is not None and ledger.pending:
            for intent in intents:
                ledger.pending.pop(id(intent), None)

    def _flows(
        self, intent: RouteIntent, decision: RouteDecision, ctx: RunContext[Any], attempt: int, t0: float
    ) -> Stopped | None:
        """The target's flow rules on ``intent`` (``None`` when it has none or they hold)."""
        assert self._rules is not None
        flow = self._rules.get(intent.target)
        return None if flow is None else _check_flows(flow, intent, decision, ctx, attempt, t0)

    async def delegate(
        self,
        intent: RouteIntent,
        ctx: RunContext[Any],
        attempt: int = 1,
        decision: RouteDecision | None = None,
        started: float | None = None,
        digest: str | None = None,
    ) -> Delegated | Stopped:
        """Run a validated ``intent`` through the gateway under ``ctx``'s ledger and check what comes back."""
        t0 = time.perf_counter() if started is None else started
        decision = decision or _NO_DECISION
        if digest is None:
            digest = args_hash(intent.args)
        emit = ctx.emit
        if emit is not None:
            emit(DelegationEvent(attempt, intent.target, digest))
        if ctx.provenance is not None:
            ctx.provenance.index()  # what earlier workers returned, as they returned it: this one may mutate it
        with ctx.spans.delegate(attempt, intent.target, digest) as delegated:  # the worker and the check of its answer
            try:
                done = await self.gateway.delegate(intent, ctx.ledger, digest=digest, ctx=ctx)
            except RunStopError as stop:
                if delegated.is_recording():
                    record_stop(delegated, stop.stop_reason)
                return _stopped_by(stop, intent, attempt, t0, decision, digest)
            result = self._observe(done, intent, attempt, t0, decision, digest, emit)
            if self._rules is not None or ctx.provenance is not None:
                self._record(result, ctx)
            _record_delegation(delegated, done, result)
            return result

    def _record(self, result: Delegated | Stopped, ctx: RunContext[Any]) -> None:
        if self.observed is None:
            _record_source(result, ctx)
        else:
            _record_observed(result, ctx, self.observed)

    def _observe(
        self,
        done: WorkerCalled | DelegationStop,
        intent: RouteIntent,
        attempt: int,
        t0: float,
        decision: RouteDecision,
        digest: str,
        emit: Callable[[Any], None] | None,
    ) -> Delegated | Stopped:
        """What the gateway's answer makes of the step: a gateway stop, or the worker's value under the
        observation check."""
        target = intent.target
        if isinstance(done, DelegationStop):
            entry = _entry(attempt, target, t0, decision, "delegate", digest, done.stop_reason)
            return Stopped(Outcome(False, done.stop_reason, "delegate", done.message), entry, intent)
        value = done.value
        if emit is not None:
            emit(ObservationEvent(attempt, target, value))
        observation = as_mapping(value)
        if observation is not None:
            status = observation.get("status")
            domain = observation.get("domain")
        else:
            status = domain = None
        refusal = self.check(observation if observation is not None else value)
        text = status if isinstance(status, str) else None
        entry = _entry(
            attempt,
            target,
            t0,
            decision,
            "delegate",
            digest,
            None,
            text,
            domain if isinstance(domain, str) else None,
            refusal is None,
        )
        if refusal is not None:
            stop_reason, message = refusal
            entry.stop_reason = stop_reason
            outcome = Outcome(False, stop_reason, "delegate", f"worker {target!r} {message}")
            return Stopped(outcome, entry, intent, value=value, status=status)
        return Delegated(intent, value, observation, text, entry)

    async def run(
        self,
        decision: RouteDecision,
        ctx: RunContext[Any],
        *,
        attempt: int = 1,
        previous: HistoryEntry | None = None,
    ) -> Delegated | Stopped:
        """:meth:`validate` then :meth:`delegate`: one governed step from a router's decision."""
        started = time.perf_counter()
        verdict = self.validate(decision, ctx, attempt=attempt, previous=previous, started=started)
        if isinstance(verdict, Stopped):
            return verdict
        return await self.delegate(verdict, ctx, attempt=attempt, decision=decision, started=started)


_NO_DECISION = RouteDecision(raw=None)


def _ledger(ctx: RunContext[Any]) -> ProvenanceLedger:
    """The run's provenance ledger; a runtime that recorded no sources gets an empty one (its rules then fail
    closed: a sensitive argument matches no source)."""
    ledger = ctx.provenance
    if ledger is None:
        ledger = ctx.provenance = ProvenanceLedger()
    return ledger


def _check_flows(
    flow: FlowRules, intent: RouteIntent, decision: RouteDecision, ctx: RunContext[Any], attempt: int, t0: float
) -> Stopped | None:
    """Match ``intent``'s arguments to the run's sources: ``None`` (the evidence kept for the delegation's trace
    entry) or the refusal of the first argument that breaks its rule."""
    ledger = _ledger(ctx)
    checked = flow.check(intent.args, ledger)
    refusal = checked.refusal
    if refusal is None:
        ledger.pending[id(intent)] = (intent, checked)
        return None
    stop = refusal.stop_reason
    if ctx.emit is not None:
        ctx.emit(DecisionEvent(attempt, decision, None, stop))
    entry = _entry(attempt, intent.target, t0, decision, "delegate", None, stop)
    entry.provenance = checked.evidence
    outcome = Outcome(False, stop, "delegate", refusal.message(intent.target))
    return Stopped(outcome, entry, intent, raw=decision.raw)


def _record_source(result: Delegated | Stopped, ctx: RunContext[Any]) -> None:
    """After a delegation: its arguments' origins go on its trace entry, and what the worker returned becomes a
    source of the run (``tool:<worker>#<n>``, with the arguments it was called with)."""
    ledger = _ledger(ctx)
    pending = ledger.pending.pop(id(result.intent), None) if ledger.pending else None
    if pending is not None and pending[0] is result.intent:
        result.trace.provenance = pending[1].evidence
    if isinstance(result, Delegated):
        intent = result.intent
        ledger.record_tool(
            intent.target, result.value if result.observation is None else result.observation, intent.args
        )


def _record_observed(result: Delegated | Stopped, ctx: RunContext[Any], observed: Callable[[object], object]) -> None:
    """:func:`_record_source` for a step whose workers wrap their output (``observed`` unwraps it)."""
    if isinstance(result, Delegated):
        value = observed(result.value)
        mapped = as_mapping(value)
        result = Delegated(result.intent, value, mapped, result.status, result.trace)
    _record_source(result, ctx)


def refusal_observation(outcome: Outcome) -> dict[str, Any]:
    """A refusal handed back to the router as an observation (``on_refusal="observe"``): what it reads in the
    history instead of a worker's output."""
    return {"status": "refused", "stop_reason": outcome.stop_reason, "message": outcome.message}


def refused_route(raw: object) -> RouteIntent:
    """The route a refused decision named, for the history: its target when it had a text one, no arguments."""
    target = raw.target if isinstance(raw, RouteProposal) else raw.get("target") if isinstance(raw, dict) else None
    return RouteIntent(sr.safe_detail(target.strip()) if isinstance(target, str) else "", {})


def output_refusal(
    check: OutputCheck, answer: str, ctx: RunContext[Any], attempt: int, target: str | None, log: logging.Logger
) -> Stopped | None:
    """The output check's verdict on a run's final ``answer``: ``None`` lets it go; a refusal is a :class:`Stopped`
    with ``output_denied:<reason>`` (phase ``finalize``) and its trace entry. A check that raises refuses: the one
    fault-to-stop conversion names its class (``output_denied:check_error:<Exc>``; its text to ``log``)."""
    started = time.perf_counter()
    try:
        reason = check(answer, ctx)
    except Exception as exc:  # a check that raises refuses
        reason = ErrorInfo.of(exc, "the output check", f"check_error:{type(exc).__name__}", "finalize", log).stop_reason
    if reason is None:
        return None
    stop = sr.output_denied(str(reason))
    entry = TraceEntry(
        attempt,
        target,
        ok=False,
        phase="finalize",
        elapsed_ms=round((time.perf_counter() - started) * 1000.0, 3),
        stop_reason=stop,
    )
    message = f"the output check refused the answer ({sr.safe_detail(str(reason))})"
    return Stopped(Outcome(False, stop, "finalize", message), entry)


def refusals_exhausted(refused: Sequence[Outcome], max_route_attempts: int) -> Outcome:
    """How a run that handed ``refused`` back to its router ends when its route attempts are used up: the last
    refusal's stop reason and phase, its message with the count."""
    last = refused[-1]
    message = (
        f"{last.message} ({len(refused)} refusal(s) handed back to the router; "
        f"max_route_attempts={max_route_attempts} used up)"
    )
    return Outcome(False, last.stop_reason, last.phase, message)


def _record_verdict(sp: Span, verdict: RouteIntent | RouteRejection, refused: Stopped | None) -> None:
    """Mark the policy span with the verdict: its target, or the stop of a refusal (a flow rule's included)."""
    if not sp.is_recording():
        return
    if isinstance(verdict, RouteRejection):
        record_stop(sp, verdict.stop_reason)
    else:
        sp.set_attribute(Attr.TARGET, verdict.target)
    if refused is not None:
        record_stop(sp, refused.stop_reason)


def _record_delegation(sp: Span, done: WorkerCalled | DelegationStop, result: Delegated | Stopped) -> None:
    if not sp.is_recording():
        return
    if isinstance(done, WorkerCalled):
        value = done.value
        status = value.get("status") if isinstance(value, Mapping) else getattr(value, "status", None)
        if isinstance(status, str):
            sp.set_attribute(Attr.OBSERVATION_STATUS, status)
    if isinstance(result, Stopped):  # the gateway refused, or the observation check did
        record_stop(sp, result.outcome.stop_reason)


def _stopped_by(
    stop: RunStopError, intent: RouteIntent, attempt: int, t0: float, decision: RouteDecision, digest: str
) -> Stopped:
    """A worker (or the gateway) raised the run-stop signal: the step stops with its stop reason and phase."""
    entry = _entry(attempt, intent.target, t0, decision, "delegate", digest, stop.stop_reason)
    phase = sr.phase_of(stop.phase) or "delegate"
    return Stopped(Outcome(False, stop.stop_reason, phase, stop.message), entry, intent)


def _entry(
    attempt: int,
    target: str | None,
    started: float,
    decision: RouteDecision,
    phase: sr.Phase,
    digest: str | None,
    stop: str | None,
    status: str | None = None,
    domain: str | None = None,
    ok: bool = False,
) -> TraceEntry:
    return TraceEntry(
        attempt,
        target,
        ok,
        phase,
        round((time.perf_counter() - started) * 1000.0, 3),
        digest,
        stop,
        status,
        domain,
        decision.decided_by or None,
        decision.scores,
        decision.why or None,
    )
