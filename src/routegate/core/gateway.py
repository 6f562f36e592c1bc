"""The gateway: the agent → executor boundary. The second allowlist, the registry and the delegation guards.

:class:`RouteGateway` is configuration (shareable across runs); :class:`DelegationLedger` is one run's state
(delegations made, signatures seen). :meth:`RouteGateway.delegate` checks, in order: ``max_delegations``, the
execution allowlist (deny by default, ``route_denied:<t>``), the registry (``route_missing:<t>``), the worker's
signature (``route_bad_args:<t>``) — these three are :meth:`RouteGateway.refusal` — and loop detection on
target + ``args_hash`` (``loop_detected``);
then it calls the worker. A worker that raises ends the run with ``route_error:<t>`` — a ``TypeError`` raised
*inside* a worker included: argument mismatches are found before the call, not guessed from the exception.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from routegate.core import stop_reasons as sr
from routegate.core._faults import ErrorInfo
from routegate.core.context import RunContext
from routegate.core.contracts import DelegationLedger, RouteIntent
from routegate.core.hashing import args_hash
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DelegationStop:
    """The gateway refused or the worker failed: the stop reason and what happened."""

    stop_reason: str
    message: str


@dataclass(frozen=True, slots=True)
class WorkerCalled:
    """The worker ran; ``value`` is what it returned (still to be checked against the observation contract)."""

    value: object
    args_hash: str


ANSWERED: Final = (WorkerCalled, DelegationStop)
"""What :meth:`RouteGateway._call` gives back when it has the answer (anything else is a coroutine to await)."""


class RouteGateway:
    """Delegates validated route intents to registered workers under the execution allowlist."""

    __slots__ = ("_allow", "_registry")

    def __init__(self, *, allow: Iterable[str], registry: Mapping[str, Worker] | Iterable[Worker]) -> None:
        self._allow = frozenset(allow)
        workers = registry.values() if isinstance(registry, Mapping) else registry
        self._registry: dict[str, Worker] = {}
        for item in workers:
            if not isinstance(item, Worker):
                raise ConfigurationError(f"registry entries must be Worker objects, got {type(item).__name__}")
            if item.name in self._registry:
                raise ConfigurationError(f"two workers are named {item.name!r}")
            self._registry[item.name] = item

    @property
    def allow(self) -> frozenset[str]:
        return self._allow

    @property
    def workers(self) -> Mapping[str, Worker]:
        return self._registry

    def refusal(self, intent: RouteIntent) -> DelegationStop | None:
        """Why the gateway would refuse ``intent`` whatever the run's ledger holds (execution allowlist, registry,
        the worker's signature); ``None`` if it would call the worker. A runtime that checks a whole batch before
        running any of it (the technique dispatcher) asks this for every part first."""
        target = intent.target
        if target not in self._allow:
            return DelegationStop(sr.route_denied(target), f"target {target!r} is not in the execution allowlist")
        found = self._registry.get(target)
        if found is None:
            return DelegationStop(sr.route_missing(target), f"no worker is registered as {target!r}")
        mismatch = found._signature.mismatch(intent.args)  # Worker.args_mismatch, one call less per delegation
        if mismatch is not None:
            return DelegationStop(sr.route_bad_args(target), f"worker {target!r}: {mismatch}")
        return None

    async def delegate(
        self,
        intent: RouteIntent,
        ledger: DelegationLedger,
        *,
        digest: str | None = None,
        ctx: RunContext[Any] | None = None,
    ) -> WorkerCalled | DelegationStop:
        """Check the guards and call the worker. ``digest`` is ``args_hash(intent.args)`` if already known;
        ``ctx`` goes to a worker that declares a :class:`~routegate.core.RunContext` parameter."""
        done = self._call(intent, ledger, digest, ctx)
        return done if isinstance(done, ANSWERED) else await done

    def _call(
        self, intent: RouteIntent, ledger: DelegationLedger, digest: str | None, ctx: RunContext[Any] | None
    ) -> WorkerCalled | DelegationStop | Coroutine[Any, Any, WorkerCalled | DelegationStop]:
        """:meth:`delegate` without a coroutine of its own: the guards and the worker's call; a worker that must
        be awaited (async, on a thread, or an inline one that returned an awaitable) gives back the coroutine that
        awaits it. The governed step calls this, so an inline worker's delegation costs no coroutine."""
        target, args = intent.target, intent.args
        ledger.delegations += 1
        if ledger.delegations > ledger.max_delegations:
            return DelegationStop(
                sr.MAX_DELEGATIONS,
                f"max_delegations={ledger.max_delegations} reached after {ledger.delegations - 1} calls",
            )
        refused = self.refusal(intent)
        if refused is not None:
            return refused
        if digest is None:
            digest = args_hash(args)
        signature = f"{target}:{digest}"
        if signature in ledger.seen:
            return DelegationStop(sr.LOOP_DETECTED, f"{target!r} was already called with the same arguments")
        ledger.seen.add(signature)
        found = self._registry[target]
        try:
            if found._awaited:  # an async or threaded worker's call is always awaited
                return _answer(found.invoke(args, ctx), target, digest)
            value = found.invoke(args, ctx)
        except RunStopError:
            raise
        except Exception as exc:
            return _worker_fault(exc, target)
        if inspect.isawaitable(value):  # an inline worker may still return an awaitable
            return _answer(value, target, digest)
        return WorkerCalled(value, digest)


async def _answer(pending: Awaitable[object], target: str, digest: str) -> WorkerCalled | DelegationStop:
    """The answer of a worker whose call must be awaited."""
    try:
        value = await pending
    except RunStopError:
        raise
    except Exception as exc:
        return _worker_fault(exc, target)
    return WorkerCalled(value, digest)


def _worker_fault(exc: Exception, target: str) -> DelegationStop:
    """A worker that raised ends the run with ``route_error:<t>``, through the one fault-to-stop conversion
    (:meth:`~routegate.core._faults.ErrorInfo.of`: reported by its class only, its text and traceback to the log)."""
    stop = ErrorInfo.of(exc, f"worker {target!r}", sr.route_error(target), "delegate", logger)
    return DelegationStop(stop.stop_reason, stop.message)
