"""``RunContext``: what one run hands to the parts that ask for it.

A worker, router, finalizer or Plan step that declares a parameter annotated ``RunContext`` (or
``RunContext[MyDeps]``) receives the run's context there; the parameter is never part of its argument schema, so a
router cannot set it and a model never sees it. The context holds:

* ``deps`` — the caller's own dependencies (typed: ``RunContext[MyDeps]``), passed as ``arun(..., deps=...)``;
* ``run_id`` — the run's id, as in its result and its log lines;
* ``deadline`` — when the run's ``Budget.max_seconds`` runs out, on the ``time.monotonic()`` clock
  (:meth:`remaining` is the time left);
* ``ledger`` — the run's :class:`~routegate.core.contracts.DelegationLedger` (delegations made, signatures seen);
* ``emit`` — where the run's events go (``None`` when nobody listens; :meth:`send` is a no-op then);
* ``provenance`` — the run's :class:`~routegate.core.provenance.ProvenanceLedger` (what entered the run, by
  source), kept only when a worker declares flow rules (``None`` otherwise);
* ``tracer`` — the OpenTelemetry tracer the run's spans go to (``None`` when no tracer provider is installed:
  then no span is opened; see :mod:`routegate.core.telemetry`);
* ``spans`` — the run's own spans (route, policy, delegate, finalize), decided once from ``tracer`` when the run
  starts: :data:`~routegate.core.telemetry.NO_SPANS`, whose methods open nothing, when it is ``None``. A context
  built by hand keeps the no-op default: a runtime's governed steps then open no span.

This replaces hidden channels (context variables, magic keys in a mapping): what a part needs from the run, it
declares.
"""

from __future__ import annotations

import inspect
import math
import secrets
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic

from opentelemetry.trace import Tracer
from typing_extensions import TypeVar

from routegate.core.contracts import Budget, DelegationLedger
from routegate.core.telemetry import NO_SPANS, Spans, spans_for, tracer

if TYPE_CHECKING:
    from routegate.core.provenance import ProvenanceLedger


class _Ask:
    """The default of ``RunContext.start(active=...)``: it asks for the tracer itself."""


_ASK = _Ask()

DepsT = TypeVar("DepsT", default=None)
RunDepsT = TypeVar("RunDepsT", default=Any)
"""The ``deps`` a runtime's runs take: ``RoutingAgent[MyDeps]``, ``Plan[MyDeps, Out]``; ``Any`` when it is not
subscripted (a run then accepts any deps, as before the runtimes were generic)."""


def new_run_id() -> str:
    """A fresh run id: 16 random hex digits. Ids name runs in results, logs and traces; they grant nothing."""
    return secrets.token_hex(8)


@dataclass(slots=True, eq=False)
class RunContext(Generic[DepsT]):
    """One run's context (see the module docstring)."""

    deps: DepsT
    run_id: str = field(default_factory=new_run_id)
    deadline: float = math.inf
    ledger: DelegationLedger = field(default_factory=lambda: DelegationLedger(3))
    emit: Callable[[Any], None] | None = None
    tracer: Tracer | None = None
    provenance: ProvenanceLedger | None = None
    spans: Spans = NO_SPANS

    @classmethod
    def start(
        cls,
        deps: DepsT,
        budget: Budget,
        *,
        emit: Callable[[Any], None] | None = None,
        run_id: str | None = None,
        active: Tracer | _Ask | None = _ASK,
    ) -> RunContext[DepsT]:
        """The context of a run starting now under ``budget`` (its deadline and delegation ledger); ``active`` is
        the run's tracer when the caller already asked :func:`~routegate.core.telemetry.tracer` for it."""
        if isinstance(active, _Ask):
            active = tracer()
        return cls(
            deps,
            run_id or new_run_id(),
            time.monotonic() + budget.max_seconds,
            DelegationLedger(budget.max_delegations),
            emit,
            active,
            None,
            spans_for(active),
        )

    def remaining(self) -> float:
        """Seconds left before the run's deadline (``inf`` without one; negative once it passed)."""
        return self.deadline - time.monotonic()

    def send(self, event: object) -> None:
        """Hand ``event`` to the run's listener, if any."""
        if self.emit is not None:
            self.emit(event)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s parameter annotated ``RunContext`` (or ``RunContext[...]``), if it has one."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to the annotation's text
        hints = {}
    for param in parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if is_context_annotation(annotation):
            return param.name
    return None


def is_context_annotation(annotation: object) -> bool:
    """``RunContext``, ``RunContext[...]``, or either ``| None`` (a wrapper that may run without a context)."""
    if annotation is RunContext or typing.get_origin(annotation) is RunContext:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(is_context_annotation(arg) for arg in typing.get_args(annotation) if arg is not type(None))
    if isinstance(annotation, str):
        text = annotation.strip().removeprefix("Optional[").removeprefix("typing.Optional[")
        head = text.split("|", 1)[0].split("[", 1)[0].strip()
        return head.rsplit(".", 1)[-1] == "RunContext"
    return False
