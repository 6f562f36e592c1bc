"""Dispatch: a handler registry keyed by kind, and every dispatch through the core policy boundary.

Each extracted part becomes an untrusted route decision ``{"kind": "route", "target": ..., "args": ...}`` with a
target named by its handler (``code:python``, ``mcp:github/list_issues``, ``a2a:reviewer``). The decision goes
through :class:`~routegate.core.RoutePolicy` (allowlist + the target's pydantic argument schema) and then
:class:`~routegate.core.RouteGateway` (execution allowlist, registry, ``max_delegations``, loop detection,
worker signature), exactly as a router's decision does in the routing agent; ``Budget.max_seconds`` bounds the
whole dispatch. So refusals carry the core stop reasons (``invalid_route:route_not_allowed:<t>``,
``route_denied:<t>``, ``route_missing:<t>``, ``max_delegations``, ``loop_detected``, ``max_seconds``...), and a
handler's own failures carry theirs (``sandbox_timeout:cpu``, ``tool_error:<t>``, ``a2a_timeout:<agent>``...).

Parts are dispatched in document order and the first one that does not succeed ends the dispatch: an output
that is partly off-policy is not half-executed further.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from routegate.core import run_sync
from routegate.core import stop_reasons as sr
from routegate.core.contracts import Budget, jsonable
from routegate.core.gateway import DelegationLedger, DelegationStop, RouteGateway
from routegate.core.policy import RoutePolicy, RouteRejection
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.technique.types import ClassifiedOutput, OutputKind, TechniqueItem

logger = logging.getLogger(__name__)


@runtime_checkable
class TechniqueHandler(Protocol):
    """Executes one kind of extracted part. It names targets and builds workers; it never checks policy."""

    @property
    def kind(self) -> OutputKind:
        """The kind this handler serves."""
        ...

    @property
    def prefix(self) -> str:
        """The target prefix it owns: ``code`` for ``code:python``."""
        ...

    def route(self, item: TechniqueItem) -> tuple[str, dict[str, Any]]:
        """The target and arguments an extracted part asks for (still untrusted)."""
        ...

    def schema(self, target: str) -> type[BaseModel] | None:
        """The argument schema the policy boundary applies to ``target`` (``None``: args need only be an object)."""
        ...

    def worker(self, target: str) -> Worker | None:
        """The worker that executes an allowed ``target``, or ``None`` if this handler cannot serve it."""
        ...


class HandlerRegistry:
    """Handlers keyed by kind (one per kind), also found by the prefix of a target."""

    __slots__ = ("_by_kind", "_by_prefix")

    def __init__(self, handlers: Iterable[TechniqueHandler] = ()) -> None:
        self._by_kind: dict[OutputKind, TechniqueHandler] = {}
        self._by_prefix: dict[str, TechniqueHandler] = {}
        for handler in handlers:
            self.register(handler)

    def register(self, handler: TechniqueHandler) -> None:
        if not isinstance(handler, TechniqueHandler):
            raise ConfigurationError(f"a technique handler needs kind, prefix, route, schema and worker: {handler!r}")
        if handler.kind is OutputKind.PROSE:
            raise ConfigurationError("prose is never dispatched; a handler for it would not be called")
        if handler.kind in self._by_kind:
            raise ConfigurationError(f"a handler for {handler.kind.value!r} is already registered")
        if handler.prefix in self._by_prefix or not handler.prefix or ":" in handler.prefix:
            raise ConfigurationError(f"handler prefix {handler.prefix!r} is empty, has ':' or is already taken")
        self._by_kind[handler.kind] = handler
        self._by_prefix[handler.prefix] = handler

    def get(self, kind: OutputKind) -> TechniqueHandler | None:
        return self._by_kind.get(kind)

    def for_target(self, target: str) -> TechniqueHandler | None:
        prefix, sep, _ = target.partition(":")
        return self._by_prefix.get(prefix) if sep else None

    def __iter__(self) -> Iterator[TechniqueHandler]:
        return iter(self._by_kind.values())


@dataclass(frozen=True, slots=True)
class DispatchOutcome:
    """What happened to one extracted part. ``value`` is the handler's result (a ``CodeRun``, ...), if it ran."""

    target: str
    stop_reason: str
    phase: sr.Phase | None = None
    message: str = ""
    value: object = None

    @property
    def ok(self) -> bool:
        return self.stop_reason == sr.SUCCESS

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target, "stop_reason": self.stop_reason}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.message:
            out["message"] = self.message
        if self.value is not None:
            out["value"] = jsonable(self.value)
        return out


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """How a dispatch ended: ``ok`` when every part of the winning kind succeeded (prose: nothing to do)."""

    kind: OutputKind
    status: Literal["ok", "stopped"]
    stop_reason: str
    phase: sr.Phase | None = None
    outcomes: tuple[DispatchOutcome, ...] = ()
    message: str = ""
    elapsed_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "status": self.status, "stop_reason": self.stop_reason}
        if self.phase is not None:
            out["phase"] = self.phase
        if self.message:
            out["message"] = self.message
        out["outcomes"] = [outcome.to_dict() for outcome in self.outcomes]
        out["elapsed_ms"] = round(self.elapsed_ms, 3)
        return out


def _value_stop_reason(value: object) -> str:
    reason = getattr(value, "stop_reason", sr.SUCCESS)
    return reason if isinstance(reason, str) and reason else sr.SUCCESS


class TechniqueDispatcher:
    """Dispatches classified output to its handler through the policy boundary and the gateway.

    ``allow`` is the policy allowlist of targets (``invalid_route:route_not_allowed:<t>`` outside it);
    ``execution_allow`` is the gateway's, applied again at execution (``route_denied:<t>``), and defaults to
    ``allow``. ``schemas`` override a handler's argument schema per target. ``budget.max_delegations`` bounds
    the parts run per output, ``budget.max_seconds`` the whole dispatch.
    """

    __slots__ = ("budget", "gateway", "handlers", "policy")

    def __init__(
        self,
        *,
        handlers: HandlerRegistry | Iterable[TechniqueHandler],
        allow: Iterable[str],
        execution_allow: Iterable[str] | None = None,
        schemas: Mapping[str, type[BaseModel]] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.handlers = handlers if isinstance(handlers, HandlerRegistry) else HandlerRegistry(handlers)
        policy_allow = frozenset(allow)
        execution = policy_allow if execution_allow is None else frozenset(execution_allow)
        overrides = dict(schemas or {})
        workers: list[Worker] = []
        checked: dict[str, type[BaseModel]] = {}
        for target in sorted(policy_allow | execution):
            handler = self.handlers.for_target(target)
            if handler is None:
                continue  # allowed but nothing serves it: route_missing:<t> when asked for
            found = handler.worker(target)
            if found is not None:
                if found.name != target:
                    raise ConfigurationError(f"handler for {target!r} built a worker named {found.name!r}")
                workers.append(found)
            schema = overrides.get(target) or handler.schema(target)
            if schema is not None:
                checked[target] = schema
        self.policy = RoutePolicy(policy_allow, checked)
        self.gateway = RouteGateway(allow=execution, registry=workers)
        self.budget = budget or Budget()

    async def adispatch(self, classified: ClassifiedOutput) -> DispatchResult:
        """Dispatch the parts of the winning kind. Never raises for anything the output holds."""
        started = time.perf_counter()
        outcomes: list[DispatchOutcome] = []

        def end(reason: str, phase: sr.Phase | None = None, message: str = "") -> DispatchResult:
            status: Literal["ok", "stopped"] = "ok" if reason == sr.SUCCESS else "stopped"
            elapsed = (time.perf_counter() - started) * 1000.0
            return DispatchResult(classified.kind, status, reason, phase, tuple(outcomes), message, elapsed)

        if classified.kind is OutputKind.PROSE:
            return end(sr.SUCCESS)
        handler = self.handlers.get(classified.kind)
        if handler is None:
            return end(
                sr.route_missing(classified.kind.value), "route", f"no handler is registered for {classified.kind}"
            )
        ledger = DelegationLedger(self.budget.max_delegations)
        timeout = asyncio.timeout(self.budget.max_seconds)
        try:
            async with timeout:
                for item in classified.items():
                    outcome = await self._one(handler, item, ledger)
                    outcomes.append(outcome)
                    if not outcome.ok:
                        return end(outcome.stop_reason, outcome.phase, outcome.message)
        except TimeoutError:
            if not timeout.expired():
                raise
            seconds = self.budget.max_seconds
            return end(sr.MAX_SECONDS, "delegate", f"max_seconds={seconds} reached after {len(outcomes)} part(s)")
        return end(sr.SUCCESS)

    def dispatch(self, classified: ClassifiedOutput) -> DispatchResult:
        """Synchronous :meth:`adispatch` (not from inside a running event loop)."""
        return run_sync(self.adispatch(classified), what="dispatch")

    async def _one(self, handler: TechniqueHandler, item: TechniqueItem, ledger: DelegationLedger) -> DispatchOutcome:
        target, args = handler.route(item)
        verdict = self.policy.validate({"kind": "route", "target": target, "args": args})
        if isinstance(verdict, RouteRejection):
            return DispatchOutcome(target, verdict.stop_reason, "route", verdict.message)
        try:
            delegated = await self.gateway.delegate(verdict, ledger)
        except RunStopError as stop:
            return DispatchOutcome(target, stop.stop_reason, "delegate", stop.message)
        if isinstance(delegated, DelegationStop):
            return DispatchOutcome(target, delegated.stop_reason, "delegate", delegated.message)
        reason = _value_stop_reason(delegated.value)
        message = str(getattr(delegated.value, "message", "")) if reason != sr.SUCCESS else ""
        phase: sr.Phase | None = None if reason == sr.SUCCESS else "delegate"
        logger.info("technique dispatch target=%s stop_reason=%s", target, reason)
        return DispatchOutcome(target, reason, phase, message, delegated.value)


__all__ = [
    "DispatchOutcome",
    "DispatchResult",
    "HandlerRegistry",
    "TechniqueDispatcher",
    "TechniqueHandler",
]
