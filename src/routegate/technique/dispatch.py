"""Dispatch: a handler registry keyed by kind, and every dispatch through the core policy boundary.

Each extracted part becomes an untrusted route decision ``{"kind": "route", "target": ..., "args": ...}`` with a
target named by its handler (``code:python``, ``mcp:github/list_issues``, ``a2a:reviewer``). The decision goes
through :class:`~routegate.core.RoutePolicy` (allowlist + the target's pydantic argument schema) and then
:class:`~routegate.core.RouteGateway` (execution allowlist, registry, ``max_delegations``, loop detection,
worker signature), exactly as a router's decision does in the routing agent; ``Budget.max_seconds`` bounds the
whole dispatch. So refusals carry the core stop reasons (``invalid_route:route_not_allowed:<t>``,
``route_denied:<t>``, ``route_missing:<t>``, ``max_delegations``, ``loop_detected``, ``max_seconds``...), and a
handler's own failures carry theirs (``sandbox_timeout:cpu``, ``tool_error:<t>``, ``a2a_timeout:<agent>``...).

All or none: every part of the output is checked before the first one runs — the policy (allowlist, argument
bounds, schema), then the gateway's guards (``max_delegations``, execution allowlist, registry, loop detection,
worker signature), then the handler's own argument check (an MCP tool's ``inputSchema``) — and one refusal
refuses the whole output. Then the parts run in document order and the first one that does not succeed ends the
dispatch. Arguments are bounded by :class:`~routegate.core.ArgLimits` and must be JSON (they travel as JSON).

:meth:`TechniqueDispatcher.adispatch` never raises for anything the output holds, nor for a handler that
raises: a handler's exception ends its part with ``route_error:<target>`` and a message naming only the
exception's class; the exception itself goes to the log (logger ``routegate.technique.dispatch``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from routegate.core import run_sync
from routegate.core import stop_reasons as sr
from routegate.core.contracts import ArgLimits, Budget, DelegationLedger, RouteIntent, jsonable
from routegate.core.gateway import DelegationStop, RouteGateway
from routegate.core.hashing import args_hash
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


@runtime_checkable
class ArgumentChecker(Protocol):
    """A handler that can check a part's arguments itself before anything runs (an MCP tool's ``inputSchema``).

    Optional: the dispatcher calls it, when a handler has it, after the policy and the gateway's guards
    accepted every part of the output and before the first part runs.
    """

    async def check_args(self, target: str, args: Mapping[str, Any]) -> RouteRejection | None:
        """``None`` when ``args`` fit ``target``; otherwise the stop reason and a message saying what is wrong."""
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


@dataclass(frozen=True, slots=True)
class _HandlerFailure:
    """What a guarded worker returns instead of raising: the caller sees the class, the log has the rest."""

    stop_reason: str
    message: str


def _failure(target: str, exc: Exception) -> _HandlerFailure:
    logger.warning("technique handler %s raised %s", target, type(exc).__name__, exc_info=exc)
    message = f"handler for {target!r} raised {type(exc).__name__}; the details are in the log"
    return _HandlerFailure(sr.route_error(target), message)


def _guarded(found: Worker) -> Worker:
    """The same worker, but an exception it raises (other than a stop signal) becomes a :class:`_HandlerFailure`."""
    fn, target = found.fn, found.name
    guarded: Any
    if found.is_async:

        @functools.wraps(fn)
        async def guarded(**args: Any) -> object:
            try:
                return await fn(**args)
            except RunStopError:
                raise
            except Exception as exc:
                return _failure(target, exc)

    else:

        @functools.wraps(fn)
        def guarded(**args: Any) -> object:
            try:
                value = fn(**args)
            except RunStopError:
                raise
            except Exception as exc:
                return _failure(target, exc)
            # hasattr on the type: inspect.isawaitable's ABC check costs more than the rest of the guard
            return _guarded_awaitable(target, value) if hasattr(type(value), "__await__") else value

    return Worker(target, guarded, found.description, found.args_model, inline=found.inline)


async def _guarded_awaitable(target: str, value: Awaitable[object]) -> object:
    """What a sync-looking worker returned to be awaited (a callable object with an async ``__call__``)."""
    try:
        return await value
    except RunStopError:
        raise
    except Exception as exc:
        return _failure(target, exc)


_Checked = tuple[RouteIntent, str]
"""A part that passed every check: its validated route and the ``args_hash`` of its arguments."""


class TechniqueDispatcher:
    """Dispatches classified output to its handler through the policy boundary and the gateway.

    ``allow`` is the policy allowlist of targets (``invalid_route:route_not_allowed:<t>`` outside it);
    ``execution_allow`` is the gateway's, applied again at execution (``route_denied:<t>``), and defaults to
    ``allow``. ``schemas`` override a handler's argument schema per target. ``limits`` bound every part's
    arguments (default :class:`~routegate.core.ArgLimits`: depth 32, 10,000 keys and elements, 1 MB).
    ``budget.max_delegations`` bounds the parts per output, ``budget.max_seconds`` the whole dispatch.
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
        limits: ArgLimits | None = None,
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
                workers.append(_guarded(found))
            schema = overrides.get(target) or handler.schema(target)
            if schema is not None:
                checked[target] = schema
        self.policy = RoutePolicy(policy_allow, checked, limits=limits, json_only=True)
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

        def fault(exc: Exception) -> DispatchResult:
            """A fault of a handler (its ``route``, its argument check) or of this code: reported, never raised."""
            kind = classified.kind.value
            logger.warning("technique dispatch of %s failed: %s", kind, type(exc).__name__, exc_info=exc)
            message = f"dispatch failed with {type(exc).__name__}; the details are in the log"
            return end(sr.route_error(kind), "delegate" if outcomes else "route", message)

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
                checked = await self._check_all(handler, classified.items())
                if isinstance(checked, DispatchOutcome):
                    outcomes.append(checked)
                    return end(checked.stop_reason, checked.phase, checked.message)
                for part in checked:
                    outcome = await self._run(part, ledger)
                    outcomes.append(outcome)
                    if not outcome.ok:
                        return end(outcome.stop_reason, outcome.phase, outcome.message)
        except TimeoutError as exc:
            if not timeout.expired():
                return fault(exc)
            seconds = self.budget.max_seconds
            return end(sr.MAX_SECONDS, "delegate", f"max_seconds={seconds} reached after {len(outcomes)} part(s)")
        except RunStopError as stop:  # a handler's route or argument check ended the dispatch on purpose
            return end(stop.stop_reason, "delegate" if outcomes else "route", stop.message)
        except Exception as exc:
            return fault(exc)
        return end(sr.SUCCESS)

    def dispatch(self, classified: ClassifiedOutput) -> DispatchResult:
        """Synchronous :meth:`adispatch` (not from inside a running event loop)."""
        return run_sync(self.adispatch(classified), what="dispatch")

    async def _check_all(
        self, handler: TechniqueHandler, items: tuple[TechniqueItem, ...]
    ) -> list[_Checked] | DispatchOutcome:
        """Every part through the policy and the gateway's guards, then the handler's own check; no part runs."""
        checked: list[_Checked] = []
        seen: set[tuple[str, str]] = set()
        for index, item in enumerate(items):
            target, args = handler.route(item)
            verdict = self.policy.validate({"kind": "route", "target": target, "args": args})
            if isinstance(verdict, RouteRejection):
                return DispatchOutcome(target, verdict.stop_reason, "route", verdict.message)
            target = verdict.target
            refusal = self._gateway_refusal(verdict, index, len(items))
            if refusal is not None:
                return DispatchOutcome(target, refusal.stop_reason, "delegate", refusal.message)
            digest = args_hash(verdict.args)
            if (target, digest) in seen:
                return DispatchOutcome(
                    target, sr.LOOP_DETECTED, "delegate", f"{target!r} is asked twice with the same arguments"
                )
            seen.add((target, digest))
            checked.append((verdict, digest))
        check_args = getattr(handler, "check_args", None)  # ArgumentChecker (getattr: isinstance costs ~10 µs)
        if check_args is not None:
            for intent, _ in checked:
                rejection = await check_args(intent.target, intent.args)
                if rejection is not None:
                    return DispatchOutcome(intent.target, rejection.stop_reason, "route", rejection.message)
        return checked

    def _gateway_refusal(self, intent: RouteIntent, index: int, parts: int) -> DelegationStop | None:
        """The gateway's guards, checked for every part before any runs (it checks them again at execution)."""
        target, limit = intent.target, self.budget.max_delegations
        if index >= limit:
            return DelegationStop(sr.MAX_DELEGATIONS, f"max_delegations={limit}, but the output has {parts} parts")
        if target not in self.gateway.allow:
            return DelegationStop(sr.route_denied(target), f"target {target!r} is not in the execution allowlist")
        found = self.gateway.workers.get(target)
        if found is None:
            return DelegationStop(sr.route_missing(target), f"no worker is registered as {target!r}")
        mismatch = found.args_mismatch(intent.args)
        if mismatch is not None:
            return DelegationStop(sr.route_bad_args(target), f"worker {target!r}: {mismatch}")
        return None

    async def _run(self, part: _Checked, ledger: DelegationLedger) -> DispatchOutcome:
        intent, digest = part
        target = intent.target
        try:
            delegated = await self.gateway.delegate(intent, ledger, digest=digest)
        except RunStopError as stop:
            return DispatchOutcome(target, stop.stop_reason, "delegate", stop.message)
        if isinstance(delegated, DelegationStop):
            return DispatchOutcome(target, delegated.stop_reason, "delegate", delegated.message)
        value = delegated.value
        reason = _value_stop_reason(value)
        message = str(getattr(value, "message", "")) if reason != sr.SUCCESS else ""
        phase: sr.Phase | None = None if reason == sr.SUCCESS else "delegate"
        logger.info("technique dispatch target=%s stop_reason=%s", target, reason)
        if isinstance(value, _HandlerFailure):
            value = None
        return DispatchOutcome(target, reason, phase, message, value)


__all__ = [
    "ArgumentChecker",
    "DispatchOutcome",
    "DispatchResult",
    "HandlerRegistry",
    "TechniqueDispatcher",
    "TechniqueHandler",
]
